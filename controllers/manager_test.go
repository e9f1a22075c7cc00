package controllers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
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

// settle bounds each wait for the manager to write a status or the configuration Secret.
const settle = 30 * time.Second

// TestManager runs the reconciler and the usage poller in a manager, as
// cmd/manager does, against a stub gateway served over HTTP: the watches
// bring the configuration Secret and the statuses, a rotated tenant key
// reaches the Secret, and the gateway's usage reaches status.
func TestManager(t *testing.T) {
	c, ns := newNamespace(t)
	resets := metav1.NewTime(time.Now().Add(24 * time.Hour).Truncate(time.Second))
	traffic := gatewayv1.Traffic{RequestsLastMinute: 42, TokensLastMinute: 33600, InFlight: 3, Queued: 7}
	providerTraffic := traffic
	providerTraffic.Refused = map[string]int64{"provider_tokens": 2}
	var failing atomic.Bool
	stub := httptest.NewServer(gatewayServing(gatewayv1.Usage{
		Gateway: "gw-1", Time: metav1.Now(),
		Providers: []gatewayv1.ProviderUsage{{Name: "openai", Traffic: providerTraffic, Throttles: 1, SpendThisMonth: "0.10"}},
		Tenants:   []gatewayv1.TenantUsage{{Name: "acme", Traffic: traffic, SpendThisPeriod: "12.5", BudgetRemaining: "87.5", ResetsAt: &resets}},
	}, &failing))
	defer stub.Close()

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
	poller := &usage.Poller{Namespace: ns, Gateways: usage.StaticGateways{stub.URL + usage.Path}, Interval: 200 * time.Millisecond, Updates: updates}
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: mgr.GetClient(), Recorder: events, SecretName: configSecretName, Usage: poller, UsageUpdates: updates}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := mgr.Add(poller); err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	pq := quota("openai", 0, "gpt-4o")
	tp := plan("pro", 0, []string{"acme"}, []string{"openai"})
	tp.Spec.Budget = &v1alpha1.Budget{Amount: "100", Period: v1alpha1.BudgetPeriodMonth}
	create(t, c, ns, &pq, &tp, ptrTo(providerSecret("openai", openaiKey)), ptrTo(keySecret("acme-alice", "acme", "alice", aliceKey)))

	poll.Until(t, settle, "the gateway's usage in the ProviderQuota's status", func() bool {
		var got v1alpha1.ProviderQuota
		get(t, c, ns, "openai", &got)
		u := got.Status.Usage
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionUsageReported) &&
			u != nil && u.RequestsLastMinute == 42 && u.Queued == 7 && u.Throttles == 1 && u.SpendThisMonth == "0.1" &&
			got.Status.LastUsageTime != nil
	})
	poll.Until(t, settle, "the tenant's spend in the TenantPlan's status", func() bool {
		var got v1alpha1.TenantPlan
		get(t, c, ns, "pro", &got)
		st := got.Status
		return meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) &&
			st.SpentThisPeriod == "12.5" && st.BudgetRemaining == "87.5" && st.Queued == 7 &&
			st.ResetsAt != nil && st.ResetsAt.Equal(&resets)
	})

	updateSecretData(t, c, ns, "acme-alice", "sk-acme-alice-rotated-0123456789")
	poll.Until(t, settle, "the rotated tenant key's hash in config.yaml", func() bool {
		cfg, err := loadWritten(t, c, ns)
		return err == nil && len(cfg.Tenants) == 1 && cfg.Tenants[0].Keys[0].SHA256 == gatewayv1.HashKey("sk-acme-alice-rotated-0123456789")
	})

	failing.Store(true)
	poll.Until(t, settle, "UsageReported=False once the gateway stops answering", func() bool {
		var got v1alpha1.ProviderQuota
		get(t, c, ns, "openai", &got)
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUsageReported)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonGatewayUnreachable &&
			got.Status.Usage != nil && got.Status.Usage.RequestsLastMinute == 42
	})
	assertNoSecretsOutside(t, c, ns, events.all())
}

// gatewayServing is a gateway's admin port serving a usage snapshot, or
// failing while failing is set.
func gatewayServing(u gatewayv1.Usage, failing *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != usage.Path || failing.Load() {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(u)
	})
}
