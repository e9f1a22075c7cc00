package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// providerLimits gathers reg's series of the providers' limits: each limit's amount and what is
// used of it, by "provider dimension per".
func providerLimits(t *testing.T, reg *prometheus.Registry) (limits, used map[string]float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	limits, used = map[string]float64{}, map[string]float64{}
	for _, f := range families {
		into := map[string]map[string]float64{"sluice_gateway_provider_limit": limits, "sluice_gateway_provider_limit_used": used}[f.GetName()]
		for _, m := range f.GetMetric() {
			if into == nil {
				break
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			into[labels["provider"]+" "+labels["dimension"]+" "+labels["per"]] = m.GetGauge().GetValue()
		}
	}
	return limits, used
}

// TestMetricsShowEachProviderLimitsUse admits a call to a provider of 600 requests and 100,000
// tokens a minute, 1,000 requests a day and 10 calls in flight, on each store: /metrics shows
// each limit in force and what the call holds of it, the paces beside the minutes left out, and
// once the call ends its tokens are what it used and its slot in flight is free.
func TestMetricsShowEachProviderLimitsUse(t *testing.T) {
	for store, newStore := range limiterStores {
		t.Run(store, func(t *testing.T) {
			p := plan{requestsPerMinute: 600, tokensPerMinute: 100_000, maxInFlight: 10, tenants: []gatewayv1.Tenant{tenant("acme", "alice")},
				provider: func(pr *gatewayv1.Provider) {
					pr.Limits = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 1_000, Per: gatewayv1.PeriodDay}}
				}}.compile(t)
			reg := prometheus.NewRegistry()
			g := New(Options{Limiter: newStore(t), Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }, Registerer: reg})
			t.Cleanup(g.Close)
			ticket := mustAdmit(t, g, request(t, p, "sk-acme-alice", 300))

			limits, used := providerLimits(t, reg)
			wantLimits := map[string]float64{
				"lab requests a minute": 600, "lab tokens a minute": 100_000, "lab requests a day": 1_000, "lab inflight at once": 10,
			}
			if diff := cmp.Diff(limits, wantLimits); diff != "" {
				t.Errorf("the provider's limits (-got +want):\n%s", diff)
			}
			want := map[string]float64{"lab requests a minute": 1, "lab tokens a minute": 300, "lab requests a day": 1, "lab inflight at once": 1}
			if diff := cmp.Diff(used, want); diff != "" {
				t.Errorf("what a call in flight holds of them (-got +want):\n%s", diff)
			}

			ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 20})
			_, used = providerLimits(t, reg)
			want["lab tokens a minute"], want["lab inflight at once"] = 120, 0
			if diff := cmp.Diff(used, want); diff != "" {
				t.Errorf("what the call holds of them once it ended (-got +want):\n%s", diff)
			}
		})
	}
}
