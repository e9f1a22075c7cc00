package policy

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// BenchmarkCompileAtScale compiles the largest configuration Sluice supports, as a gateway does
// at each reload (each new record too): 5,000 tenants of 4 users, each user with a day's quota and
// each tenant with a budget, and a record of every tenant's windows.
func BenchmarkCompileAtScale(b *testing.B) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		b.Fatal(err)
	}
	plan := cfg.Tenants[0]
	cfg.Tenants = nil
	ends := metav1.NewTime(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	for i := range 5000 {
		t := plan
		t.Name = fmt.Sprintf("tenant-%d", i)
		t.Keys = nil
		used := map[string]int64{"tenant:budget": 1000}
		for u := range 4 {
			user := fmt.Sprintf("user-%d", u)
			t.Keys = append(t.Keys, gatewayv1.Key{SHA256: gatewayv1.HashKey(t.Name + user), User: user})
			used["user:"+user+":requests:day"] = 10
		}
		cfg.Tenants = append(cfg.Tenants, t)
		cfg.Record = append(cfg.Record, gatewayv1.ScopeRecord{Scope: "tenant:" + t.Name, Version: 3, Windows: []gatewayv1.WindowsEnding{{EndsAt: ends, Used: used}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(cfg, 1); err != nil {
			b.Fatal(err)
		}
	}
}
