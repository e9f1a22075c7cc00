package usage

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// epoch is the tests' fixed time.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptrTo[T any](v T) *T { return &v }

// snapshot returns a gateway's usage snapshot taken seconds after epoch.
func snapshot(gateway string, seconds int, providers []gatewayv1.ProviderUsage, tenants []gatewayv1.TenantUsage) *gatewayv1.Usage {
	return &gatewayv1.Usage{Gateway: gateway, Time: metav1.NewTime(epoch.Add(time.Duration(seconds) * time.Second)), Providers: providers, Tenants: tenants}
}

func traffic(requests, tokens, inFlight, queued int64, refused map[string]int64) gatewayv1.Traffic {
	return gatewayv1.Traffic{RequestsLastMinute: requests, TokensLastMinute: tokens, InFlight: inFlight, Queued: queued, Refused: refused}
}

func queuedTokens(t gatewayv1.Traffic, tokens int64) gatewayv1.Traffic {
	t.QueuedTokens = tokens
	return t
}

func TestSum(t *testing.T) {
	resets := metav1.NewTime(epoch.Add(24 * time.Hour))
	earlier := metav1.NewTime(epoch.Add(time.Hour))
	tests := []struct {
		name    string
		reports []GatewayReport
		want    Totals
	}{{
		name: "the lowest learned limit and the summed throttles' caps",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 5, []gatewayv1.ProviderUsage{
				{Name: "openai", LearnedLimits: &gatewayv1.LearnedLimits{RequestsPerMinute: 600, TokensPerMinute: 40_000, OutputTokensPerMinute: 8_000}, ThrottledInFlight: 4},
			}, nil)},
			{Gateway: "gw-2", Usage: snapshot("gw-2", 5, []gatewayv1.ProviderUsage{
				{Name: "openai", LearnedLimits: &gatewayv1.LearnedLimits{RequestsPerMinute: 500, InputTokensPerMinute: 30_000, OutputTokensPerMinute: 9_000},
					Traffic: gatewayv1.Traffic{InputTokensLastMinute: 700, OutputTokensLastMinute: 80}, ThrottledInFlight: 2},
				{Name: "llama"},
			}, nil)},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {SpendThisMonth: "0", InputTokensLastMinute: 700, OutputTokensLastMinute: 80}, "llama": {SpendThisMonth: "0"}},
			Tenants:   map[string]TenantTotals{},
			Feedback: map[string]ProviderFeedback{
				"openai": {Learned: gatewayv1.LearnedLimits{RequestsPerMinute: 500, TokensPerMinute: 40_000, InputTokensPerMinute: 30_000, OutputTokensPerMinute: 8_000},
					ThrottledInFlight: 6},
			},
			Oldest: epoch.Add(5 * time.Second), Gateways: 2,
		},
	}, {
		name: "the gateways whose breaker holds a provider out, and the times they opened",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 5, []gatewayv1.ProviderUsage{{Name: "openai", Breaker: gatewayv1.BreakerOpen, BreakerOpens: 2}}, nil)},
			{Gateway: "gw-2", Usage: snapshot("gw-2", 5, []gatewayv1.ProviderUsage{{Name: "openai", Breaker: gatewayv1.BreakerHalfOpen, BreakerOpens: 1}}, nil)},
			{Gateway: "gw-3", Usage: snapshot("gw-3", 5, []gatewayv1.ProviderUsage{{Name: "openai", Breaker: gatewayv1.BreakerClosed, BreakerOpens: 1}}, nil)},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {SpendThisMonth: "0", BreakersOpen: 2, BreakerOpens: 4}},
			Tenants:   map[string]TenantTotals{},
			Oldest:    epoch.Add(5 * time.Second), Gateways: 3,
		},
	}, {
		name: "the batches of the store every gateway shares, counted once",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 5, []gatewayv1.ProviderUsage{{Name: "openai", BatchesQueued: 1, BatchesRunning: 3}}, nil)},
			{Gateway: "gw-2", Usage: snapshot("gw-2", 5, []gatewayv1.ProviderUsage{{Name: "openai", BatchesQueued: 1, BatchesRunning: 3}}, nil)},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {SpendThisMonth: "0", BatchesQueued: 1, BatchesRunning: 3}},
			Tenants:   map[string]TenantTotals{},
			Oldest:    epoch.Add(5 * time.Second), Gateways: 2,
		},
	}, {
		name: "no gateway",
		want: Totals{Providers: map[string]v1alpha1.ProviderUsage{}, Tenants: map[string]TenantTotals{}},
	}, {
		name: "traffic and a provider's spend add up",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 5, []gatewayv1.ProviderUsage{
				{Name: "openai", Traffic: queuedTokens(traffic(10, 8000, 2, 1, map[string]int64{"tenant_requests": 3}), 800), Throttles: 1, SpendThisMonth: "1.25"},
			}, nil)},
			{Gateway: "gw-2", Usage: snapshot("gw-2", 3, []gatewayv1.ProviderUsage{
				{Name: "openai", Traffic: queuedTokens(traffic(5, 4000, 1, 2, map[string]int64{"tenant_requests": 1, "provider_tokens": 2}), 1200), SpendThisMonth: "0.75"},
				{Name: "llama", Traffic: traffic(1, 100, 0, 0, nil)},
			}, nil)},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{
				"openai": {RequestsLastMinute: 15, TokensLastMinute: 12000, InFlight: 3, Queued: 3, QueuedTokens: 2000, Throttles: 1, SpendThisMonth: "2",
					Refused: []v1alpha1.RefusedCount{{Reason: "provider_tokens", Count: 2}, {Reason: "tenant_requests", Count: 4}}},
				"llama": {RequestsLastMinute: 1, TokensLastMinute: 100, SpendThisMonth: "0"},
			},
			Tenants: map[string]TenantTotals{},
			Oldest:  epoch.Add(3 * time.Second), Gateways: 2,
		},
	}, {
		name: "a budget is read from the shared store, not summed",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 0, nil, []gatewayv1.TenantUsage{
				{Name: "acme", Traffic: traffic(0, 0, 0, 2, nil), SpendThisPeriod: "40", BudgetRemaining: "60", ResetsAt: &resets},
				{Name: "globex", Traffic: traffic(0, 0, 0, 0, map[string]int64{"user_requests": 5}), SpendThisPeriod: "1.5"},
			})},
			{Gateway: "gw-2", Usage: snapshot("gw-2", 0, nil, []gatewayv1.TenantUsage{
				{Name: "acme", Traffic: traffic(0, 0, 0, 1, nil), SpendThisPeriod: "41", BudgetRemaining: "59", ResetsAt: &earlier},
				{Name: "globex", SpendThisPeriod: "2.5"},
			})},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{},
			Tenants: map[string]TenantTotals{
				"acme":   {Queued: 3, SpentMicros: 41_000_000, RemainingMicros: ptrTo[int64](59_000_000), ResetsAt: earlier.Time},
				"globex": {SpentMicros: 4_000_000, Refused: map[string]int64{"user_requests": 5}},
			},
			Oldest: epoch, Gateways: 2,
		},
	}, {
		name: "a silent gateway counts with its last report; one never heard is not read as zero",
		reports: []GatewayReport{
			{Gateway: "gw-1", Usage: snapshot("gw-1", 10, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(10, 10, 0, 0, nil)}}, nil)},
			{Gateway: "gw-2", Usage: snapshot("gw-2", -30, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(7, 7, 0, 0, nil)}}, nil), Err: errors.New("connection refused")},
			{Gateway: "gw-3", Err: errors.New("answered 503 Service Unavailable")},
		},
		want: Totals{
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {RequestsLastMinute: 17, TokensLastMinute: 17, SpendThisMonth: "0"}},
			Tenants:   map[string]TenantTotals{},
			Oldest:    epoch.Add(-30 * time.Second), Gateways: 3,
			Unanswered: []string{"gw-2: connection refused", "gw-3: answered 503 Service Unavailable"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Sum(tc.reports)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Sum (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusedCountsKeepsTheMostFrequent(t *testing.T) {
	m := map[string]int64{}
	for i := range maxRefused + 3 {
		m[string(rune('a'+i))] = int64(i + 1)
	}
	got := RefusedCounts(m)
	if len(got) != maxRefused || got[0].Reason != "d" || got[len(got)-1].Reason != string(rune('a'+maxRefused+2)) {
		t.Errorf("RefusedCounts kept %v; want the %d most frequent, by reason", got, maxRefused)
	}
}
