package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
)

// pausedConfig is a configuration of one provider, paused or not, and tenant acme's alice, who
// waits at most maxWait.
func pausedConfig(upstreamURL string, paused bool, maxWait string) string {
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
    maxWait: %s
`, upstreamURL, paused, gatewayv1.HashKey(keyAlice), maxWait)
}

// TestPausedProviderQueues checks what the operator relies on when a self-hosted provider has no
// ready Pod: a paused provider gets no call, its calls wait in the queue, and they go once a
// reload lifts the pause.
func TestPausedProviderQueues(t *testing.T) {
	up := newUpstream(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeAtomically(t, path, pausedConfig(up.URL, true, "60s"))
	var senders sync.WaitGroup
	t.Cleanup(senders.Wait) // after the gateway has stopped, so they return
	g := startGateway(t, path)

	answers := make(chan answer, 2)
	for range 2 {
		senders.Go(func() { answers <- g.post(t, "/v1/chat/completions", keyAlice, chatBody) })
	}
	poll.Until(t, processWait, "two calls queued for the paused provider", func() bool {
		u := g.usage(t)
		return len(u.Providers) == 1 && u.Providers[0].Queued == 2
	})
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the paused provider received %d calls; want none", n)
	}

	writeAtomically(t, path, pausedConfig(up.URL, false, "60s"))
	for range 2 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a queued call after the pause: %d %s; want 200", a.status, a.body)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("the provider received %d calls; want the 2 that waited", n)
	}
}

// TestPausedProviderAnswersBusyAfterMaxWait checks that a call to a paused provider waits no
// longer than its plan's maxWait: it is then answered busy, as the door would have, and never
// reaches the provider.
func TestPausedProviderAnswersBusyAfterMaxWait(t *testing.T) {
	up := newUpstream(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeAtomically(t, path, pausedConfig(up.URL, true, "1s"))
	g := startGateway(t, path)

	a := g.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if a.status != http.StatusTooManyRequests || a.errorCode(t) != "queue_busy" {
		t.Fatalf("a call to a paused provider after maxWait: %d %s; want 429 queue_busy", a.status, a.body)
	}
	checkBusy(t, a, time.Second)
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the paused provider received %d calls; want none", n)
	}
	if u := g.usage(t); len(u.Providers) != 1 || u.Providers[0].Queued != 0 {
		t.Errorf("usage after the call was answered: %+v; want nothing queued", u.Providers)
	}
}
