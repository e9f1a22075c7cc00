package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// snapshots is a UsageSource that sums the snapshots it is given, as the
// poller sums what the gateways serve.
type snapshots struct{ reports []usage.GatewayReport }

func (s *snapshots) Usage(string) *usage.Totals {
	t := usage.Sum(s.reports)
	return &t
}

// report sets one gateway's snapshot of the openai provider.
func (s *snapshots) report(p gatewayv1.ProviderUsage) {
	p.Name = "openai"
	s.reports = []usage.GatewayReport{{Gateway: "gw-1", Usage: &gatewayv1.Usage{Gateway: "gw-1", Time: metav1.NewTime(epoch), Providers: []gatewayv1.ProviderUsage{p}}}}
}

// TestLowerLimitsReportedByTheGatewaysShowInStatus runs the reconciler on a
// real API server with a gateway's snapshot that says the provider reports
// 600 requests per minute against the 1,500 of its spec, and throttles:
// status shows the learned limits, the lowered effective ones, the
// LimitsBelowSpec condition and an event, and all go back once the snapshot
// says nothing lower.
func TestLowerLimitsReportedByTheGatewaysShowInStatus(t *testing.T) {
	c, ns := newNamespace(t)
	ctx := context.Background()
	events := &recorder{}
	gateways := &snapshots{}
	r := &GatewayConfigReconciler{Client: c, Recorder: events, Clock: clocktesting.NewFakePassiveClock(epoch), SecretName: configSecretName, Usage: gateways}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}
	openai := quota("openai", 0, "gpt-4o")
	openai.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: 1500, TokensPerMinute: 300000}
	openai.Spec.HeadroomPercent = 90
	secret := providerSecret("openai", openaiKey)
	create(t, c, ns, &openai, &secret)

	gateways.report(gatewayv1.ProviderUsage{LearnedLimits: &gatewayv1.LearnedLimits{RequestsPerMinute: 600}, ThrottledInFlight: 4})
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var got v1alpha1.ProviderQuota
	get(t, c, ns, "openai", &got)
	if diff := cmp.Diff(&v1alpha1.ProviderLimits{RequestsPerMinute: 600}, got.Status.LearnedLimits); diff != "" {
		t.Errorf("learnedLimits (-want +got):\n%s", diff)
	}
	// 90% of the 600 reported, of the spec's 300,000 tokens, and the throttled gateway's cap.
	if diff := cmp.Diff(&v1alpha1.ProviderLimits{RequestsPerMinute: 540, TokensPerMinute: 270000, MaxInFlight: 4}, got.Status.EffectiveLimits); diff != "" {
		t.Errorf("effectiveLimits while the provider reports lower limits (-want +got):\n%s", diff)
	}
	assertLimitsCondition(t, &got, metav1.ConditionTrue, v1alpha1.ReasonProviderReportsLower)
	wantEvent := "*v1alpha1.ProviderQuota openai: Warning ProviderReportsLower ReadProviderLimits: The provider reports 600 requests per minute"
	if all := events.all(); !strings.Contains(all, wantEvent) {
		t.Errorf("events:\n%s\nwant one holding %q", all, wantEvent)
	}

	gateways.report(gatewayv1.ProviderUsage{}) // the provider recovered
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	get(t, c, ns, "openai", &got)
	if got.Status.LearnedLimits != nil {
		t.Errorf("learnedLimits = %+v after the provider recovered; want none", got.Status.LearnedLimits)
	}
	if diff := cmp.Diff(&v1alpha1.ProviderLimits{RequestsPerMinute: 1350, TokensPerMinute: 270000}, got.Status.EffectiveLimits); diff != "" {
		t.Errorf("effectiveLimits after the provider recovered (-want +got):\n%s", diff)
	}
	assertLimitsCondition(t, &got, metav1.ConditionFalse, v1alpha1.ReasonLimitsAsSpec)
	wantEvent = "*v1alpha1.ProviderQuota openai: Normal LimitsAsSpec ReadProviderLimits"
	if all := events.all(); !strings.Contains(all, wantEvent) {
		t.Errorf("events:\n%s\nwant one holding %q", all, wantEvent)
	}
}

func assertLimitsCondition(t *testing.T, pq *v1alpha1.ProviderQuota, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(pq.Status.Conditions, v1alpha1.ConditionLimitsBelowSpec)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("LimitsBelowSpec = %+v; want %s with reason %s", c, status, reason)
	}
}
