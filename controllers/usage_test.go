package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

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

func TestSumUsage(t *testing.T) {
	resets := metav1.NewTime(epoch.Add(24 * time.Hour))
	earlier := metav1.NewTime(epoch.Add(time.Hour))
	tests := []struct {
		name    string
		reports []GatewayReport
		want    UsageTotals
	}{{
		name: "no gateway",
		want: UsageTotals{Providers: map[string]v1alpha1.ProviderUsage{}, Tenants: map[string]TenantTotals{}},
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
		want: UsageTotals{
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
		want: UsageTotals{
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
		want: UsageTotals{
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {RequestsLastMinute: 17, TokensLastMinute: 17, SpendThisMonth: "0"}},
			Tenants:   map[string]TenantTotals{},
			Oldest:    epoch.Add(-30 * time.Second), Gateways: 3,
			Unanswered: []string{"gw-2: connection refused", "gw-3: answered 503 Service Unavailable"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SumUsage(tc.reports)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SumUsage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusedCountsKeepsTheMostFrequent(t *testing.T) {
	m := map[string]int64{}
	for i := range maxRefused + 3 {
		m[string(rune('a'+i))] = int64(i + 1)
	}
	got := refusedCounts(m)
	if len(got) != maxRefused || got[0].Reason != "d" || got[len(got)-1].Reason != string(rune('a'+maxRefused+2)) {
		t.Errorf("refusedCounts kept %v; want the %d most frequent, by reason", got, maxRefused)
	}
}

// fakeGateway serves a usage snapshot, or fails while failing is set.
type fakeGateway struct {
	usage   gatewayv1.Usage
	failing atomic.Bool
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != UsagePath || g.failing.Load() {
		http.Error(w, "no", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(g.usage)
}

// TestUsagePollerPolls polls stub gateways over HTTP on loopback: one that
// answers, one that stops answering, and an address nothing listens on.
func TestUsagePollerPolls(t *testing.T) {
	one := &fakeGateway{usage: *snapshot("gw-1", 0, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(10, 100, 1, 0, nil)}}, nil)}
	two := &fakeGateway{usage: *snapshot("gw-2", 0, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(5, 50, 0, 2, nil)}}, nil)}
	s1, s2 := httptest.NewServer(one), httptest.NewServer(two)
	defer s1.Close()
	defer s2.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	updates := make(chan event.GenericEvent, 4)
	p := &UsagePoller{
		Namespace: "sluice",
		Gateways:  StaticGateways{s1.URL + UsagePath, s2.URL + UsagePath, dead.URL + UsagePath},
		Updates:   updates,
	}
	ctx := context.Background()
	if got := p.Usage("sluice"); got != nil {
		t.Fatalf("Usage before a poll = %+v; want nil", got)
	}

	p.Poll(ctx)
	u := p.Usage("sluice")
	if got := u.Providers["openai"]; got.RequestsLastMinute != 15 || got.InFlight != 1 || got.Queued != 2 {
		t.Errorf("openai after the first poll = %+v; want 15 requests, 1 in flight, 2 queued", got)
	}
	if len(u.Unanswered) != 1 || u.Gateways != 3 {
		t.Errorf("gateways %d, unanswered %q; want 3 and the dead one", u.Gateways, u.Unanswered)
	}
	if ev := <-updates; ev.Object.GetNamespace() != "sluice" {
		t.Errorf("update names namespace %q; want sluice", ev.Object.GetNamespace())
	}

	// The second gateway stops answering: its last report still counts.
	two.failing.Store(true)
	p.Poll(ctx)
	u = p.Usage("sluice")
	if got := u.Providers["openai"].RequestsLastMinute; got != 15 {
		t.Errorf("openai requests with a silent gateway = %d; want 15, its last report counted", got)
	}
	want := s2.URL + UsagePath + ": answered 503 Service Unavailable"
	if len(u.Unanswered) != 2 || u.Unanswered[1] != want && u.Unanswered[0] != want {
		t.Errorf("unanswered = %q; want %q among them", u.Unanswered, want)
	}
	if got := p.Usage("elsewhere"); got != nil {
		t.Errorf("Usage of another namespace = %+v; want nil", got)
	}
}
