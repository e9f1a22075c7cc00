package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
)

// TestGatewayIsNotStoppedByWhatAProviderSays runs a gateway process in front of a provider of 1,000
// requests and 200,000 tokens a minute whose first answer says its limits are one request and one
// token a minute. The gateway learns them held at their floor, a hundredth of the configured limits,
// and every later call, of either user, still reaches the provider.
func TestGatewayIsNotStoppedByWhatAProviderSays(t *testing.T) {
	up := &upstream{}
	var answered atomic.Bool
	up.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answered.CompareAndSwap(false, true) {
			w.Header().Set("X-Ratelimit-Limit-Requests", "1")
			w.Header().Set("X-Ratelimit-Limit-Tokens", "1")
		}
		up.serve(w, r)
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, learningConfig(t, up.URL))
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
		t.Fatalf("the first call: %d %s; want 200", a.status, a.body)
	}
	want := gatewayv1.LearnedLimits{RequestsPerMinute: 10, TokensPerMinute: 2_000}
	poll.Until(t, processWait, fmt.Sprintf("the gateway to learn %+v", want), func() bool {
		l := g.usage(t).Providers[0].LearnedLimits
		return l != nil && *l == want
	})
	for i, key := range []string{keyAlice, keyCarol, keyAlice, keyCarol} {
		if a := g.post(t, "/v1/chat/completions", key, chatBody); a.status != http.StatusOK {
			t.Errorf("call %d after the provider said one token a minute: %d %s; want 200", i+2, a.status, a.body)
		}
	}
	if got := up.calls.Load(); got != 5 {
		t.Errorf("the provider received %d calls; want all 5", got)
	}
}

// learningConfig writes a configuration of one tenant, acme (alice and carol), on one provider of
// 1,000 requests and 200,000 tokens a minute at upstreamURL, and returns its path.
func learningConfig(t *testing.T, upstreamURL string) string {
	t.Helper()
	path := writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: stub
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base}
    requestsPerMinute: 1000
    tokensPerMinute: 200000
tenants:
  - name: acme
    keys:
      - {sha256: %s, user: alice}
      - {sha256: %s, user: carol}
    providers: [stub]
`, upstreamURL, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyCarol)))
	return path
}
