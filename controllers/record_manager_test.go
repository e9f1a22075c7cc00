package controllers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
	"github.com/sluicehq/sluice/test/poll"
)

// stubGateway is a gateway's admin port: it serves a usage snapshot at
// usage.Path and a record snapshot at gatewayv1.RecordPath, and keeps the
// record requests it took. It is safe for concurrent use.
type stubGateway struct {
	mu       sync.Mutex
	usage    gatewayv1.Usage
	record   gatewayv1.Record
	requests []gatewayv1.RecordRequest
}

func (g *stubGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == usage.Path:
		json.NewEncoder(w).Encode(g.usage)
	case r.Method == http.MethodPost && r.URL.Path == gatewayv1.RecordPath:
		var req gatewayv1.RecordRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g.requests = append(g.requests, req)
		json.NewEncoder(w).Encode(g.record)
	default:
		http.NotFound(w, r)
	}
}

// serve makes the gateway serve u and rec from now on, and forgets the
// record requests it took.
func (g *stubGateway) serve(u gatewayv1.Usage, rec gatewayv1.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.usage, g.record, g.requests = u, rec, nil
}

// asked returns the record requests taken since the last serve.
func (g *stubGateway) asked() []gatewayv1.RecordRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayv1.RecordRequest(nil), g.requests...)
}

// TestManagerKeepsRecord runs the reconciler and the usage poller with the
// record ConfigMaps in a manager, as cmd/manager does, against a stub
// gateway served over HTTP. The gateway's record reaches the ConfigMaps,
// which the configuration names for the gateways to load, and the
// TenantPlan's and ProviderQuota's status. Then the gateway's store comes
// back empty: its snapshot, not current, raises the record but lowers
// nothing, and the status still shows what was spent.
func TestManagerKeepsRecord(t *testing.T) {
	c, ns := newNamespace(t)
	resets := metav1.NewTime(time.Now().Add(24 * time.Hour).Truncate(time.Second))
	taken := metav1.NewTime(time.Now().Truncate(time.Second))
	gw := &stubGateway{}
	gw.serve(tenantUsage("12.5", "87.5", resets), gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind, Scopes: []gatewayv1.ScopeRecord{
		{Scope: "openai", Version: 2, TakenAt: taken, Current: true, Windows: []gatewayv1.WindowsEnding{{EndsAt: resets, Used: map[string]int64{providerMonthKey: 500_000}}}},
		{Scope: "tenant:acme", Version: 5, TakenAt: taken, Current: true, Windows: []gatewayv1.WindowsEnding{{EndsAt: resets, Used: map[string]int64{
			budgetKey: 12_500_000, "tenant:requests:day": 80, "endpoint:chat:tokens:day": 5000, "user:alice:requests:day": 3, "user:bob:requests:day": 4,
		}}}},
	}})
	stub := httptest.NewServer(gw)
	defer stub.Close()
	startManagerWithRecord(t, ns, stub.URL+usage.Path)

	pq := quota("openai", 0, "gpt-4o")
	pq.Spec.Spend = &v1alpha1.Spend{PerMonth: "1000"}
	tp := plan("pro", 0, []string{"acme"}, []string{"openai"})
	tp.Spec.Budget = &v1alpha1.Budget{Amount: "100", Period: v1alpha1.BudgetPeriodMonth}
	create(t, c, ns, &pq, &tp, ptrTo(providerSecret("openai", openaiKey)), ptrTo(keySecret("acme-alice", "acme", "alice", aliceKey)))

	wantWindows := []v1alpha1.RecordedWindow{
		{Name: "endpoint:chat:tokens:day", Used: 5000, ResetsAt: resets},
		{Name: budgetKey, Used: 12_500_000, ResetsAt: resets},
		{Name: "tenant:requests:day", Used: 80, ResetsAt: resets},
	}
	var tpStatus v1alpha1.TenantPlanStatus
	poll.Until(t, settle, "the record in the TenantPlan's status", func() bool {
		var got v1alpha1.TenantPlan
		get(t, c, ns, "pro", &got)
		tpStatus = got.Status
		r := tenantRecordIn(tpStatus)
		return r != nil && r.Version == 5 && r.Users == 2 && cmp.Equal(r.Windows, wantWindows) && tpStatus.SpentThisPeriod == "12.5"
	})
	poll.Until(t, settle, "the provider's recorded month spend in its status", func() bool {
		var got v1alpha1.ProviderQuota
		get(t, c, ns, "openai", &got)
		return got.Status.RecordedSpendThisMonth == "0.5"
	})
	cfg := mustLoadWritten(t, c, ns)
	if len(cfg.RecordFiles) != RecordShards {
		t.Errorf("config.yaml names record files %q; want %d", cfg.RecordFiles, RecordShards)
	}
	if got := loadedScope(cfg, "tenant:acme"); got == nil || got.Version != 5 || got.Windows[0].Used[budgetKey] != 12_500_000 {
		t.Errorf("the record a gateway loads holds tenant:acme as %+v; want version 5 with the budget's 12.5 dollars", got)
	}

	// The store comes back empty: the gateway's snapshot is behind the
	// record, and its usage reports next to nothing spent.
	gw.serve(tenantUsage("0.0001", "99.9999", resets), gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind, Scopes: []gatewayv1.ScopeRecord{
		{Scope: "openai", Version: 0, TakenAt: taken},
		{Scope: "tenant:acme", Version: 0, TakenAt: taken, Windows: []gatewayv1.WindowsEnding{{EndsAt: resets, Used: map[string]int64{
			budgetKey: 100, "tenant:requests:day": 2, "user:carol:requests:day": 1,
		}}}},
	}})
	poll.Until(t, settle, "a record request after the store came back empty, and the record raised by it", func() bool {
		asked := gw.asked()
		if len(asked) == 0 {
			return false
		}
		if got := asked[0].Versions; got["tenant:acme"] != 5 || got["openai"] != 2 {
			t.Fatalf("the gateway was asked for versions %v; want the record's, tenant:acme 5 and openai 2", got)
		}
		got := loadedScope(mustLoadWritten(t, c, ns), "tenant:acme")
		return got != nil && got.Windows[0].Used["user:carol:requests:day"] == 1
	})
	got := loadedScope(mustLoadWritten(t, c, ns), "tenant:acme")
	want := map[string]int64{budgetKey: 12_500_000, "tenant:requests:day": 80, "endpoint:chat:tokens:day": 5000,
		"user:alice:requests:day": 3, "user:bob:requests:day": 4, "user:carol:requests:day": 1}
	if got.Version != 5 || len(got.Windows) != 1 || !cmp.Equal(got.Windows[0].Used, want) {
		t.Errorf("the record of tenant:acme after a snapshot behind it: version %d, windows %+v; want version 5 and %v", got.Version, got.Windows, want)
	}
	poll.Until(t, settle, "the TenantPlan's status to show the record's spend, not the empty store's", func() bool {
		var got v1alpha1.TenantPlan
		get(t, c, ns, "pro", &got)
		tpStatus = got.Status
		r := tenantRecordIn(tpStatus)
		return r != nil && r.Users == 3 && tpStatus.SpentThisPeriod == "12.5" && tpStatus.BudgetRemaining == "87.5" &&
			tpStatus.Tenants[0].SpentThisPeriod == "12.5"
	})
}

// startManagerWithRecord starts a manager with the reconciler and a usage
// poller that keeps the record in ConfigMaps, polling the gateway at
// usageURL, until the test ends.
func startManagerWithRecord(t *testing.T, ns, usageURL string) {
	t.Helper()
	mgr, err := ctrl.NewManager(startAPIServer(t), ctrl.Options{
		Scheme:                 testScheme(t),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan event.GenericEvent)
	record := &RecordConfigMaps{Client: mgr.GetClient(), Recorder: &recorder{}, Namespace: ns, SecretName: configSecretName}
	poller := &usage.Poller{Namespace: ns, Gateways: usage.StaticGateways{usageURL}, Interval: 200 * time.Millisecond, Updates: updates, Record: record}
	r := &GatewayConfigReconciler{Client: mgr.GetClient(), Recorder: &recorder{}, SecretName: configSecretName, Usage: poller, UsageUpdates: updates}
	ctx, cancel := context.WithCancel(context.Background())
	if err := mgr.Add(poller); err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// tenantUsage is a gateway's usage snapshot of the tenant acme's budget.
func tenantUsage(spent, left gatewayv1.Money, resets metav1.Time) gatewayv1.Usage {
	return gatewayv1.Usage{Gateway: "gw-1", Time: metav1.Now(), Tenants: []gatewayv1.TenantUsage{
		{Name: "acme", SpendThisPeriod: spent, BudgetRemaining: left, ResetsAt: &resets},
	}}
}

// tenantRecordIn returns the record of the plan's first tenant, or nil.
func tenantRecordIn(st v1alpha1.TenantPlanStatus) *v1alpha1.TenantRecord {
	if len(st.Tenants) == 0 {
		return nil
	}
	return st.Tenants[0].Record
}

// loadedScope returns the scope named name of a loaded configuration's
// record, or nil.
func loadedScope(cfg *gatewayv1.Config, name string) *gatewayv1.ScopeRecord {
	for i := range cfg.Record {
		if cfg.Record[i].Scope == name {
			return &cfg.Record[i]
		}
	}
	return nil
}
