package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// simulated is the lab's provider, run as a process, behind a recorder of which tenant's calls
// reached it, in order.
type simulated struct {
	url, direct string
	mu          sync.Mutex
	order       []string
}

func newSimulated(t *testing.T, rpm, inFlight int64) *simulated {
	if testing.Short() {
		t.Skip("runs the lab and the gateway binaries; skipped with -short")
	}
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr,
		"-requests-per-minute", fmt.Sprint(rpm), "-tokens-per-minute", "10000000", "-max-in-flight", fmt.Sprint(inFlight),
		"-latency", "100ms", "-latency-stddev", "0"))
	s := &simulated{direct: "http://" + addr}
	poll.Until(t, processWait, "the lab provider", func() bool {
		resp, err := http.Get(s.direct + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	target, _ := url.Parse(s.direct)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ User string }
		json.Unmarshal(body, &req)
		s.mu.Lock()
		s.order = append(s.order, req.User)
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// stats is the provider's count of what it accepted and refused.
type stats struct {
	Accepted, Rejected429Requests, Rejected429Tokens, Rejected503 int64
}

func (s *simulated) Stats(t *testing.T) stats {
	t.Helper()
	resp, err := http.Get(s.direct + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (s *simulated) arrivals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// queueConfig writes a configuration whose tenants all queue at the provider's limits: 600
// requests a minute, tokensPerMinute tokens and inFlight calls at once.
func queueConfig(t *testing.T, sim *simulated, tokensPerMinute, inFlight int64, tenants ...string) string {
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: sim
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    requestsPerMinute: 600
    tokensPerMinute: %d
    maxInFlight: %d
    prices: {inputPerMillion: "3", outputPerMillion: "3"}
tenants:
`, sim.url, tokensPerMinute, inFlight)
	for _, tenant := range tenants {
		name, maxWait, _ := strings.Cut(tenant, ":")
		if maxWait == "" {
			maxWait = "60s"
		}
		fmt.Fprintf(&b, "  - {name: %s, keys: [{sha256: %s, user: u}], providers: [sim], maxWait: %s}\n", name, gatewayv1.HashKey("sk-"+name), maxWait)
	}
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// page is a chat call tagged with its tenant, asking for maxTokens.
func page(tenant string, maxTokens int) string {
	return fmt.Sprintf(`{"model":"gpt-4o-mini","user":%q,"max_tokens":%d,"messages":[{"role":"user","content":"A page of a book."}]}`, tenant, maxTokens)
}

// burst sends n calls of a tenant at once and returns their answers.
func (g *gateway) burst(t *testing.T, tenant string, n, maxTokens int) []answer {
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = g.post(t, "/v1/chat/completions", "sk-"+tenant, page(tenant, maxTokens)) })
	}
	wg.Wait()
	return answers
}

func TestQueueKeepsTheProviderClean(t *testing.T) {
	sim := newSimulated(t, 600, 4)
	g := startGateway(t, queueConfig(t, sim, 10_000_000, 4, "acme", "globex"))
	var answers []answer
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tenant := range []string{"acme", "globex"} {
		wg.Go(func() {
			a := g.burst(t, tenant, 25, 50)
			mu.Lock()
			answers = append(answers, a...)
			mu.Unlock()
		})
	}
	wg.Wait()
	waited := 0
	for _, a := range answers {
		if a.status != http.StatusOK {
			t.Errorf("a queued call was answered %d %s; want every accepted call answered", a.status, a.body)
		}
		if a.header.Get(headerQueueWait) == "" {
			t.Errorf("an answer has no %s header", headerQueueWait)
		}
		if a.header.Get(headerQueueWait) != "0" {
			waited++
		}
	}
	if waited == 0 {
		t.Error("no call waited: the bursts did not reach the limits, so nothing was tested")
	}
	st := sim.Stats(t)
	if st.Rejected429Requests+st.Rejected429Tokens+st.Rejected503 != 0 || st.Accepted != 50 {
		t.Errorf("the provider saw %+v; want 50 accepted and no 429 or 503", st)
	}
}

const headerQueueWait = "X-Sluice-Queue-Wait-Ms"

func TestQueueServesASmallTenantWithinOneRound(t *testing.T) {
	sim := newSimulated(t, 600, 2)
	g := startGateway(t, queueConfig(t, sim, 10_000_000, 2, "big", "small"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.burst(t, "big", 30, 3000) // about 3,000 tokens each: two and a half per 8,192-token round
	}()
	poll.Until(t, processWait, "big's calls to queue", func() bool { return g.queues(t).Tenants[0].Queued >= 20 })
	if q := g.queues(t).Providers[0]; q.QueuedTokens < q.Queued*3000 {
		t.Errorf("the provider's queue holds %d requests of %d estimated tokens; want at least 3,000 tokens each", q.Queued, q.QueuedTokens)
	}
	before := len(sim.arrivals())
	if a := g.post(t, "/v1/chat/completions", "sk-small", page("small", 3000)); a.status != http.StatusOK {
		t.Fatalf("small's call: %d %s", a.status, a.body)
	}
	<-done
	order := sim.arrivals()
	pos := -1
	for i, tenant := range order {
		if tenant == "small" {
			pos = i
		}
	}
	t.Logf("small reached the provider at %d; %d calls had when it arrived; %d in all", pos, before, len(order))
	// When small arrived, `before` calls had reached the provider and up to two were being
	// decided; big's round then holds at most three more.
	if pos < 0 || pos > before+5 {
		t.Errorf("small's call reached the provider %dth, %d after it queued behind big's backlog; want within one round:\n%v", pos+1, pos-before, order)
	}
}

func TestQueueDoorRefusesWithAPosition(t *testing.T) {
	sim := newSimulated(t, 600, 4)
	// 60,000 tokens a minute: a 3,000-token call drains in about 3 s, past tight's 1 s.
	g := startGateway(t, queueConfig(t, sim, 60_000, 4, "tight:1s"))
	answers := g.burst(t, "tight", 6, 3000)
	busy := 0
	for _, a := range answers {
		if a.status == http.StatusTooManyRequests && a.errorCode(t) == "queue_busy" {
			busy++
			checkBusy(t, a, time.Second)
		}
	}
	if busy == 0 {
		t.Errorf("no call was turned away at the door; answers: %v", statuses(answers))
	}
	if st := sim.Stats(t); st.Rejected429Tokens+st.Rejected429Requests+st.Rejected503 != 0 {
		t.Errorf("the provider refused calls: %+v", st)
	}
}

// checkBusy checks the place and the time to come back a queue_busy answer gives, for a plan
// that waits at most maxWait: a place of at least 1, the call's own, and a Retry-After of at least
// a second that covers the wait estimated past maxWait.
func checkBusy(t *testing.T, a answer, maxWait time.Duration) {
	t.Helper()
	position, retry, estimate := a.int(t, "X-Sluice-Queue-Position"), a.int(t, "Retry-After"), a.int(t, "X-Sluice-Queue-Estimate-Ms")
	if position < 1 || retry < 1 || time.Duration(retry)*time.Second < time.Duration(estimate)*time.Millisecond-maxWait {
		t.Errorf("a busy answer at position %d says Retry-After %d s for a wait estimated at %d ms; want a position of at least 1 and a Retry-After of at least 1 s that covers the wait past maxWait, %s",
			position, retry, estimate, maxWait)
	}
}

// TestQueueForgetsAClientThatLeft checks that a call whose client leaves while it waits leaves
// the queue: it never reaches the provider, and its tenant is charged nothing. The provider is
// paused until the client has left, so that the call is sure to be waiting when it does.
func TestQueueForgetsAClientThatLeft(t *testing.T) {
	sim := newSimulated(t, 600, 2)
	config := queueConfig(t, sim, 10_000_000, 2, "big", "gone")
	running, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, config, strings.Replace(string(running), "  - name: sim\n", "  - name: sim\n    paused: true\n", 1))
	g := startGateway(t, config)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.burst(t, "big", 10, 3000)
	}()
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(page("gone", 3000)))
	req.Header.Set("Authorization", "Bearer sk-gone")
	answered := make(chan int, 1) // the status, or 0 for a call that got no answer
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	poll.Until(t, processWait, "big's calls and gone's to queue", func() bool {
		u := g.usage(t)
		return u.Tenants[0].Queued == 10 && u.Tenants[1].Queued == 1
	})
	leave()
	if status := <-answered; status != 0 {
		t.Fatalf("the call that should have waited was answered %d", status)
	}
	poll.Until(t, processWait, "gone's call to leave the queue", func() bool { return g.usage(t).Tenants[1].Queued == 0 })
	writeAtomically(t, config, string(running)) // the pause lifted, big's calls go
	<-done
	for _, tenant := range sim.arrivals() {
		if tenant == "gone" {
			t.Error("the provider received the call of a client that had left")
		}
	}
	if n := len(sim.arrivals()); n != 10 {
		t.Errorf("the provider received %d calls; want big's 10", n)
	}
	gone := g.usage(t).Tenants[1]
	if gone.Queued != 0 || gone.SpendThisPeriod != "0" || gone.RequestsLastMinute != 0 {
		t.Errorf("the tenant that left shows %+v; want nothing queued, spent or sent", gone)
	}
}

func statuses(answers []answer) []int {
	var out []int
	for _, a := range answers {
		out = append(out, a.status)
	}
	return out
}
