package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// leaseWait bounds the wait for a dead gateway's slots in flight to come back: a few times the
// lease (policy.LeaseTTL), which a live gateway renews and a dead one does not.
const leaseWait = 2 * time.Minute

// holdingProvider holds every call that says "hold" (a stream, after its first chunk) until its
// caller leaves, and the first call that says "hold once"; it answers any other call with 10
// tokens of usage. It is safe for concurrent use.
type holdingProvider struct {
	*httptest.Server
	holding atomic.Int64 // calls held now
	served  atomic.Int64 // calls answered whole
	once    sync.Once
}

func startHoldingProvider(t *testing.T) *holdingProvider {
	p := &holdingProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *holdingProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	stream := strings.Contains(string(body), `"stream":true`)
	hold := strings.Contains(string(body), `"hold"`)
	if strings.Contains(string(body), `"hold once"`) {
		p.once.Do(func() { hold = true })
	}
	if stream {
		startStream(w, chunk(`{"role":"assistant"}`))
	}
	if hold {
		p.holding.Add(1)
		defer p.holding.Add(-1)
		<-r.Context().Done()
		return
	}
	if stream {
		startStream(w, chunk(`{"content":"Hi"}`), usageChunk, "data: [DONE]\n\n")
	} else {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}
	p.served.Add(1)
}

// TestGatewayKilledMidStream runs two gateways on one Redis and kills one (SIGKILL) while it
// holds every slot its provider allows: a stream and a job, both at the provider. The other
// gateway takes the job over and finishes it, charged once; the dead gateway's slots come back
// when their lease ends, and the other gateway can then hold the provider's maxInFlight calls at
// once. The stream the dead gateway held stays charged at its estimate: the provider had it.
func TestGatewayKilledMidStream(t *testing.T) {
	skipShort(t)
	t.Parallel() // it waits out a lease, doing nothing
	p := startHoldingProvider(t)
	redis := redisserver.Start(t)
	config := writeConfig(t, settings{provider: p.URL, store: redisStore(redis.Addr, "closed"), maxInFlight: 2, timeout: "1s",
		jobs: "jobs: {maxAttempts: 3, reclaimAfter: 1s}"})
	a, b := startGateway(t, config), startGateway(t, config)

	stream := a.openStream(t, "hold")
	streamEstimate := budgetMicros - micros(t, gatewayv1.Money(stream.Header.Get("X-Sluice-Budget-Remaining")))
	job := a.addJob(t, "hold once")
	poll.Until(t, processWait, "the stream and the job at the provider", func() bool { return p.holding.Load() == 2 })
	if got := redis.Client(t).ZCard(t.Context(), "{lab}:provider:inflight").Val(); got != 2 {
		t.Fatalf("Redis holds %d slots in flight; want the 2 of the stream and the job", got)
	}

	a.proc.Kill()
	var done jobState
	poll.Until(t, leaseWait, "the job to finish on the other gateway", func() bool {
		done = b.job(t, job)
		return done.Status == "succeeded" || done.Status == "failed"
	})
	if done.Status != "succeeded" || done.Attempts != 2 {
		t.Errorf("the job ended %s after %d attempts; want succeeded at its second", done.Status, done.Attempts)
	}
	if got, want := b.tenantSpend(t), streamEstimate+10; got != want || p.served.Load() != 1 {
		t.Errorf("the tenant spent %d µ$ and the provider served %d calls; want the job served once for 10 µ$, and the dead stream's %d µ$ estimate",
			got, p.served.Load(), streamEstimate)
	}

	held := p.holding.Load()
	for range 2 {
		b.openStream(t, "hold")
	}
	poll.Until(t, leaseWait, "the other gateway to hold 2 calls at the provider", func() bool { return p.holding.Load() == held+2 })
}

// openStream starts a streamed chat of content and returns the answer once its headers have
// come; its body is closed when the test ends.
func (g *gateway) openStream(t *testing.T, content string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"model":"gpt-4o-mini","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, faultTokens, content)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req) // no timeout: the stream is held as long as the test says
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	return resp
}

// jobState is a job as the gateway answers it.
type jobState struct {
	ID, Status string
	Attempts   int
}

// addJob adds a chat job of content and returns its id.
func (g *gateway) addJob(t *testing.T, content string) string {
	t.Helper()
	body := fmt.Sprintf(`{"endpoint":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":%d,"messages":[{"role":"user","content":%q}]}}`, faultTokens, content)
	a := g.do(http.MethodPost, "/v1/jobs", body)
	var j jobState
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &j) != nil || j.ID == "" {
		t.Fatalf("POST /v1/jobs: %d %s (%v); want 202 and a job", a.status, a.body, a.err)
	}
	return j.ID
}

// job reads a job.
func (g *gateway) job(t *testing.T, id string) jobState {
	t.Helper()
	a := g.do(http.MethodGet, "/v1/jobs/"+id, "")
	var j jobState
	if a.status != http.StatusOK || json.Unmarshal(a.body, &j) != nil {
		t.Fatalf("GET /v1/jobs/%s: %d %s (%v)", id, a.status, a.body, a.err)
	}
	return j
}
