package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// streamHolder is a provider whose streams, of calls whose content starts "hold", send their first
// chunk and then hold until release is called (or the test ends). It counts the streams open by
// the tenant the content names after "hold ", and the most open at once. Any other call it
// answers at once, as upstream does.
type streamHolder struct {
	*upstream
	mu         sync.Mutex
	open, most map[string]int
	released   chan struct{}
	once       sync.Once
}

func newStreamHolder(t *testing.T) *streamHolder {
	h := &streamHolder{upstream: &upstream{}, open: map[string]int{}, most: map[string]int{}, released: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	t.Cleanup(h.release)
	return h
}

func (h *streamHolder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	json.Unmarshal(body, &req)
	tenant, held := strings.CutPrefix(lastContent(req), "hold ")
	if !held {
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h.upstream.serve(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Once\"}}]}\n\n")
	w.(http.Flusher).Flush()
	h.opened(tenant, 1)
	defer h.opened(tenant, -1)
	select {
	case <-h.released:
	case <-r.Context().Done():
		return
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// opened counts a tenant's stream opening (+1) or ending (-1).
func (h *streamHolder) opened(tenant string, delta int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open[tenant] += delta
	h.most[tenant] = max(h.most[tenant], h.open[tenant])
}

// holding returns the streams of tenant open now, and the most that were at once.
func (h *streamHolder) holding(tenant string) (open, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open[tenant], h.most[tenant]
}

func (h *streamHolder) release() { h.once.Do(func() { close(h.released) }) }

// holdBody is a stream the provider holds, of the tenant named.
func holdBody(tenant string) string {
	return `{"model":"gpt-4o-mini","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hold ` + tenant + `"}]}`
}

// inFlightConfig writes a configuration of tenants acme (key keyAlice), whose perTenant limits
// are given, and globex (key keyBob), on one provider at upstreamURL that takes 100 calls at
// once, with the server and store sections given.
func inFlightConfig(t *testing.T, upstreamURL, sections, acmeLimits string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
%s
providers:
  - name: stub
    baseURL: %s/v1
    models: [{name: gpt-4o-mini}]
    maxInFlight: 100
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [stub]
    perTenant: %s
  - name: globex
    keys: [{sha256: %s, user: bob}]
    providers: [stub]
`, sections, upstreamURL, gatewayv1.HashKey(keyAlice), acmeLimits, gatewayv1.HashKey(keyBob))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openStreams sends n streams the provider holds, of tenant with key, to the gateways in turn,
// and returns the answers' statuses once every one has ended.
func openStreams(t *testing.T, gateways []*gateway, n int, tenant, key string) func() []int {
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		g := gateways[i%len(gateways)]
		wg.Go(func() { statuses[i] = g.post(t, "/v1/chat/completions", key, holdBody(tenant)).status })
	}
	return func() []int {
		wg.Wait()
		return statuses
	}
}

// count returns how many of statuses are want.
func count(statuses []int, want int) int {
	n := 0
	for _, s := range statuses {
		if s == want {
			n++
		}
	}
	return n
}

// TestAPlansCallsInFlightHoldAcrossGateways runs two gateways on one Redis and a tenant, acme,
// allowed two calls at once: of its six long streams, sent to both gateways, the provider holds
// two, and the other four wait in acme's lanes, while the other tenant's calls go through on
// both gateways. Once the streams end, every waiting one goes in turn, never more than two at
// once.
func TestAPlansCallsInFlightHoldAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	const streams, limit = 6, 2
	up := newStreamHolder(t)
	redis := redisserver.Start(t)
	store := fmt.Sprintf("store:\n  type: redis\n  redis: {address: %q, replicas: 2}\n", redis.Addr)
	config := inFlightConfig(t, up.URL, store, "[{dimension: inFlight, amount: 2}]")
	gateways := []*gateway{startGateway(t, config), startGateway(t, config)}

	ended := openStreams(t, gateways, streams, "acme", keyAlice)
	poll.Until(t, processWait, "acme's streams to be held or queued", func() bool {
		open, _ := up.holding("acme")
		return open == limit && queuedOf(t, gateways, "acme") == streams-limit
	})
	for i := range 10 {
		g := gateways[i%2]
		if a := g.post(t, "/v1/chat/completions", keyBob, chatBody); a.status != http.StatusOK {
			t.Errorf("globex's call %d while acme's streams wait: %d %s; want 200", i, a.status, a.body)
		}
	}
	if _, most := up.holding("acme"); most != limit {
		t.Errorf("the provider held %d of acme's streams at once; want its limit, %d", most, limit)
	}
	up.release()
	statuses := ended()
	if ok := count(statuses, http.StatusOK); ok != streams {
		t.Errorf("acme's streams ended %v; want all %d answered 200", statuses, streams)
	}
	if _, most := up.holding("acme"); most != limit {
		t.Errorf("the provider held %d of acme's streams at once once they went; want at most %d", most, limit)
	}
}

// queuedOf counts the calls of tenant waiting in the gateways' queues.
func queuedOf(t *testing.T, gateways []*gateway, tenant string) int64 {
	var n int64
	for _, g := range gateways {
		for _, q := range g.queues(t).Tenants {
			if q.Name == tenant {
				n += q.Queued
			}
		}
	}
	return n
}

// TestATenantCannotHoldTheWholeGateway runs a gateway of maxInFlight 8 and two tenants with no
// limits of their own: of acme's twelve long streams the gateway holds seven, seven eighths of
// it, and refuses the other five 503 server_overloaded, while every call of globex's goes through.
func TestATenantCannotHoldTheWholeGateway(t *testing.T) {
	const streams, share = 12, 7
	up := newStreamHolder(t)
	config := inFlightConfig(t, up.URL, "server: {maxConnections: 64, maxInFlight: 8}", "[]")
	g := startGateway(t, config)

	ended := openStreams(t, []*gateway{g}, streams, "acme", keyAlice)
	poll.Until(t, processWait, "the provider to hold acme's share of the gateway", func() bool {
		open, _ := up.holding("acme")
		return open == share && strings.Contains(g.metrics(t), fmt.Sprintf(`sluice_gateway_overloaded_total{tenant="acme"} %d`, streams-share))
	})
	for i := range 10 {
		if a := g.post(t, "/v1/chat/completions", keyBob, chatBody); a.status != http.StatusOK {
			t.Errorf("globex's call %d while acme holds its share: %d %s; want 200", i, a.status, a.body)
		}
	}
	up.release()
	statuses := ended()
	if ok, refused := count(statuses, http.StatusOK), count(statuses, http.StatusServiceUnavailable); ok != share || refused != streams-share {
		t.Errorf("acme's streams ended %v; want %d answered 200 and %d refused 503", statuses, share, streams-share)
	}
	if m := g.metrics(t); strings.Contains(m, `sluice_gateway_overloaded_total{tenant="globex"}`) {
		t.Errorf("globex's calls were refused as overloaded:\n%s", grep(m, "sluice_gateway_overloaded"))
	}
}
