package overhead

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
)

func TestGatewayConfig(t *testing.T) {
	path, err := gatewayproc.WriteConfig(t.TempDir(), gatewayConfig("http://127.0.0.1:9", 2000, 128), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gatewayv1.Load(path) // as the gateway reads it
	if err != nil {
		t.Fatal(err)
	}
	p, tn := cfg.Providers[0], cfg.Tenants[0]
	// Each level's limit queues and allows ten times 2,000 requests a
	// second, and ten times their tokens, of 50,000 at most each.
	levels := map[string][]gatewayv1.Limit{
		"user":     tn.PerUser,
		"tenant":   tn.PerTenant,
		"endpoint": tn.Endpoints[0].Limits,
		"global":   cfg.Global,
	}
	want := map[string][]gatewayv1.Limit{
		"user":     {{Dimension: "requests", Amount: 20_000, Per: "second", Burst: 20_000, OnLimit: "Queue"}},
		"tenant":   {{Dimension: "tokens", Amount: 60_000_000_000, Per: "minute", Burst: 60_000_000_000, OnLimit: "Queue"}},
		"endpoint": {{Dimension: "requests", Amount: 1_200_000, Per: "minute", Burst: 1_200_000, OnLimit: "Queue"}},
		"global":   {{Dimension: "requests", Amount: 20_000, Per: "second", Burst: 20_000, OnLimit: "Queue"}},
	}
	if diff := cmp.Diff(levels, want); diff != "" {
		t.Errorf("limits by level (-got +want):\n%s", diff)
	}
	gotProvider := []int64{p.RequestsPerMinute, p.TokensPerMinute, p.MaxInFlight}
	if diff := cmp.Diff(gotProvider, []int64{1_200_000, 60_000_000_000, 1280}); diff != "" {
		t.Errorf("the provider's requests and tokens per minute and calls in flight (-got +want):\n%s", diff)
	}
	if p.BaseURL != "http://127.0.0.1:9/v1" || len(tn.Keys) != users || tn.Endpoints[0].Endpoint != gatewayv1.EndpointChat {
		t.Errorf("base URL %q, %d keys, endpoint %q; want the stub's /v1, %d keys, chat", p.BaseURL, len(tn.Keys), tn.Endpoints[0].Endpoint, users)
	}
}
