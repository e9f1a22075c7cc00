package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// pausedConfig is a configuration of one provider, paused or not, and tenant acme's alice.
func pausedConfig(upstreamURL string, paused bool) string {
	return fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: llama
    baseURL: %s/v1
    models: [{name: gpt-4o-mini}]
    paused: %v
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [llama]
`, upstreamURL, paused, gatewayv1.HashKey(keyAlice))
}

// TestPausedProviderQueues checks what the operator relies on when a self-hosted provider has no
// ready Pod: a paused provider gets no call, its calls wait in the queue, and they go once a
// reload lifts the pause.
func TestPausedProviderQueues(t *testing.T) {
	up := newUpstream(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeAtomically(t, path, pausedConfig(up.URL, true))
	g := startGateway(t, path)

	answers := make(chan answer, 2)
	for range 2 {
		go func() { answers <- g.post(t, "/v1/chat/completions", keyAlice, chatBody) }()
	}
	waitFor(t, "two calls queued for the paused provider", func() bool {
		u := g.usage(t)
		return len(u.Providers) == 1 && u.Providers[0].Queued == 2
	})
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the paused provider received %d calls; want none", n)
	}

	writeAtomically(t, path, pausedConfig(up.URL, false))
	for range 2 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a queued call after the pause: %d %s; want 200", a.status, a.body)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("the provider received %d calls; want the 2 that waited", n)
	}
}
