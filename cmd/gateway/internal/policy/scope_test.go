package policy

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// TestScopesHoldEveryCalendarWindowOnce compiles a configuration with calendar windows at every
// level: a tenant's (its users' day, its budget), the global day and a provider's month of spend.
// Each is a scope with its mark, which a call's checks carry at the record's version, and whose
// record's windows seed the store by key.
func TestScopesHoldEveryCalendarWindowOnce(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].SpendPerMonth = "1000"
	cfg.Global = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 1_000_000, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject}}
	ends := metav1.NewTime(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	cfg.Record = []gatewayv1.ScopeRecord{{Scope: "tenant:acme", Version: 7, Windows: []gatewayv1.WindowsEnding{
		{EndsAt: ends, Used: map[string]int64{"user:alice:requests:day": 40, "user:gone:requests:day": 3}},
	}}}
	p, err := Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"openai":        {"{openai}:provider:microdollars:month"},
		"sluice:global": {"{sluice:global}:requests:day"},
		"tenant:acme":   {"{tenant:acme}:tenant:budget", "{tenant:acme}:user:alice:requests:day"},
	}
	scopes := p.Scopes()
	for _, s := range scopes {
		var keys []string
		for _, l := range s.Windows {
			keys = append(keys, l.Key)
		}
		slices.Sort(keys)
		if w, ok := want[s.Name]; !ok || !slices.Equal(w, keys) {
			t.Errorf("scope %s holds %v; want %v", s.Name, keys, w)
		}
		if s.Mark.Key != "{"+s.Name+"}:record" {
			t.Errorf("scope %s's mark is %s", s.Name, s.Mark.Key)
		}
	}
	if len(scopes) != len(want) {
		t.Errorf("%d scopes; want %d (globex has no calendar window: no scope)", len(scopes), len(want))
	}

	alice, route := p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0]
	checks, _ := Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{}, Shared, "l")
	marks := map[string]int64{}
	for _, c := range checks {
		if c.Limit.IsMark() {
			marks[c.Limit.Key] = c.Cost
			if s := ScopeOf(alice, route, c.Limit); s == nil || s.Mark != c.Limit {
				t.Errorf("ScopeOf(%s) = %v", c.Limit.Key, s)
			}
		}
	}
	wantMarks := map[string]int64{"{tenant:acme}:record": 7, "{sluice:global}:record": 0, "{openai}:record": 0}
	if len(marks) != len(wantMarks) {
		t.Errorf("a call checks the marks %v; want %v", marks, wantMarks)
	}
	for k, v := range wantMarks {
		if marks[k] != v {
			t.Errorf("a call checks %s at version %d; want %d", k, marks[k], v)
		}
	}

	seeds := p.byName["acme"].scope.Seeds()
	if len(seeds) != 1 || seeds[0].Limit.Key != "{tenant:acme}:user:alice:requests:day" || seeds[0].Used != 40 || !seeds[0].End.Equal(ends.Time) {
		t.Errorf("seeds %+v; want alice's 40 requests to midnight, the user no longer configured left out", seeds)
	}
	st := ratelimit.ScopeState{Version: 8, Current: true, At: ends.Add(-time.Hour), Windows: []ratelimit.Seed{{}, seeds[0]}}
	rec := p.byName["acme"].scope.Recorded(st)
	if rec.Scope != "tenant:acme" || rec.Version != 8 || !rec.Current || len(rec.Windows) != 1 || rec.Windows[0].Used["user:alice:requests:day"] != 40 {
		t.Errorf("recorded %+v; want version 8, current, alice's 40 requests", rec)
	}
}
