package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// poolProvider is a provider of model m on loopback that counts the calls it receives and
// answers each as the test last said: served with 7 tokens in and 3 out, or a status of its own.
type poolProvider struct {
	*httptest.Server
	calls  atomic.Int64
	status atomic.Int64 // 0 serves
	mu     sync.Mutex
	last   *http.Request
	delay  time.Duration
}

func newPoolProvider(t *testing.T, delay time.Duration) *poolProvider {
	p := &poolProvider{delay: delay}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		p.calls.Add(1)
		p.mu.Lock()
		p.last = r
		p.mu.Unlock()
		time.Sleep(p.delay)
		if status := p.status.Load(); status != 0 {
			w.WriteHeader(int(status))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	t.Cleanup(p.Close)
	return p
}

// lastRequest is the last call the provider received.
func (p *poolProvider) lastRequest() *http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// poolConfig is the settle table's gateway with model m served by a pool: "big", at a, with ten
// times the limits of "small", at b, which charges ten times the price. Each breaker opens after
// two failures in a row and stays open for a minute.
func poolConfig(a, b string) *gatewayv1.Config {
	cfg := settleConfig(a)
	big := &cfg.Providers[0]
	big.Name, big.TokensPerMinute, big.MaxInFlight = "big", 1_000_000, 100
	big.Breaker = gatewayv1.Breaker{Failures: 2, OpenFor: metav1.Duration{Duration: time.Minute}}
	small := *big
	small.Name, small.BaseURL, small.TokensPerMinute, small.MaxInFlight = "small", b+"/v1", 100_000, 10
	small.Prices = gatewayv1.Prices{InputPerMillion: "10.00", OutputPerMillion: "20.00"}
	cfg.Providers = append(cfg.Providers, small)
	cfg.Tenants[0].Providers = []string{"big", "small"}
	return cfg
}

// clock is a test's time, moved by hand.
type clock struct{ now atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.now.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.now.Add(int64(d)) }

// TestPoolFailsOverAndBreaks sends calls to a pool whose first provider fails them: each is
// served by the other without an error reaching its client, charged once at the price of the
// provider that served it, and after two failures in a row the first provider's breaker opens
// and no call tries it until its probe, which brings it back.
func TestPoolFailsOverAndBreaks(t *testing.T) {
	for _, fault := range []struct {
		name string
		fail func(p *poolProvider)
	}{
		{"500", func(p *poolProvider) { p.status.Store(http.StatusInternalServerError) }},
		{"refused", func(p *poolProvider) { p.Close() }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			big, small := newPoolProvider(t, 0), newPoolProvider(t, 0)
			clk := newClock()
			g := newSettleGatewayAt(t, poolConfig(big.URL, small.URL), clk.Now)
			fault.fail(big)
			for i := range 4 {
				if code, body := g.call(t.Context(), false); code != http.StatusOK {
					t.Fatalf("call %d: %d %s; want 200 from the pool's other provider", i, code, body)
				}
			}
			if got := big.calls.Load(); fault.name == "500" && got != 2 {
				t.Errorf("the failing provider received %d calls; want 2, then its breaker opened", got)
			}
			if got := small.calls.Load(); got != 4 {
				t.Errorf("the other provider served %d calls; want 4", got)
			}
			spent := g.charged(t)
			// Each call used 7 tokens in and 3 out, at small's $10 and $20 a million: 130
			// micro-dollars; at big's, it would have been 13.
			if want := int64(4 * 130); spent.micros != want || spent.requests != 4 {
				t.Errorf("charged %d requests and %d micro-dollars; want 4 and %d, each call once at the price of the provider that served it", spent.requests, spent.micros, want)
			}
			if got := breakerOf(t, g, "big"); got != gatewayv1.BreakerOpen {
				t.Errorf("big's breaker is %q; want Open", got)
			}
			if fault.name != "500" {
				return
			}
			big.status.Store(0)
			clk.advance(time.Minute)
			if code, body := g.call(t.Context(), false); code != http.StatusOK {
				t.Fatalf("the probe: %d %s", code, body)
			}
			if got := breakerOf(t, g, "big"); got != gatewayv1.BreakerClosed {
				t.Errorf("after a served probe big's breaker is %q; want Closed", got)
			}
		})
	}
}

// breakerOf is the state of a provider's breaker in the gateway's usage snapshot.
func breakerOf(t *testing.T, g *settleGateway, provider string) gatewayv1.BreakerState {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/admin/usage", nil)
	w := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(w, r)
	var u gatewayv1.Usage
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatalf("/admin/usage: %v: %s", err, w.Body.String())
	}
	for _, p := range u.Providers {
		if p.Name == provider {
			return p.Breaker
		}
	}
	t.Fatalf("/admin/usage has no provider %s", provider)
	return ""
}

// TestPoolSpreadsByLimits sends a crowd at once to a pool whose providers both serve: calls go
// to the least loaded for its limits, so both serve and the one with ten times the limits serves
// more.
func TestPoolSpreadsByLimits(t *testing.T) {
	big, small := newPoolProvider(t, 20*time.Millisecond), newPoolProvider(t, 20*time.Millisecond)
	g := newSettleGatewayFrom(t, poolConfig(big.URL, small.URL))
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if code, body := g.call(t.Context(), false); code != http.StatusOK {
				t.Errorf("%d %s", code, body)
			}
		})
	}
	wg.Wait()
	b, s := big.calls.Load(), small.calls.Load()
	t.Logf("big served %d calls, small %d", b, s)
	if s == 0 || b <= s {
		t.Errorf("big served %d calls and small %d; want both to serve, big more", b, s)
	}
}

// TestProviderDownWithoutAnother sends calls to a model of one provider that fails them: once
// its breaker opens, a call is answered 503 provider_unavailable at once, with when to come back,
// and is charged nothing.
func TestProviderDownWithoutAnother(t *testing.T) {
	p := newPoolProvider(t, 0)
	p.status.Store(http.StatusBadGateway)
	cfg := settleConfig(p.URL)
	cfg.Providers[0].Breaker = gatewayv1.Breaker{Failures: 1, OpenFor: metav1.Duration{Duration: time.Minute}}
	g := newSettleGatewayFrom(t, cfg)
	if code, _ := g.call(t.Context(), false); code != http.StatusBadGateway {
		t.Fatalf("first call: %d; want the provider's 502", code)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"provider_unavailable"`) || w.Header().Get("Retry-After") != "60" {
		t.Errorf("second call: %d, Retry-After %q, %s; want 503 provider_unavailable, Retry-After 60", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	if got := p.calls.Load(); got != 1 {
		t.Errorf("the provider received %d calls; want 1: the second never went", got)
	}
	if spent := g.charged(t); spent.requests != 0 || spent.micros != 0 {
		t.Errorf("charged %+v; want nothing", spent)
	}
}

// TestAzureProvider sends a call to an Azure OpenAI provider: it goes to the model's deployment
// with the provider's api-version, and its key in api-key, never in Authorization.
func TestAzureProvider(t *testing.T) {
	p := newPoolProvider(t, 0)
	cfg := settleConfig(p.URL)
	cfg.Providers[0].BaseURL = p.URL + "/azure"
	cfg.Providers[0].Azure = &gatewayv1.Azure{APIVersion: "2024-10-21", Deployments: map[string]string{"m": "prod-m"}}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("azure-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].APIKeyFile = keyFile
	g := newSettleGatewayFrom(t, cfg)
	if code, body := g.call(t.Context(), false); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	r := p.lastRequest()
	if got, want := r.URL.Path, "/azure/openai/deployments/prod-m/chat/completions"; got != want {
		t.Errorf("path %q; want %q", got, want)
	}
	if got := r.URL.Query().Get("api-version"); got != "2024-10-21" {
		t.Errorf("api-version %q; want 2024-10-21", got)
	}
	if got, auth := r.Header.Get("Api-Key"), r.Header.Get("Authorization"); got != "azure-key" || auth != "" {
		t.Errorf("api-key %q, Authorization %q; want the key in api-key alone", got, auth)
	}
}

// TestPoolJobGoesWhereItWasAdmitted runs a job for a pooled model while the pool's first provider
// is out (its breaker open): the job's call is sent to the provider the gate admitted it to, and
// charged at its prices.
func TestPoolJobGoesWhereItWasAdmitted(t *testing.T) {
	big, small := newPoolProvider(t, 0), newPoolProvider(t, 0)
	g := newSettleGatewayFrom(t, poolConfig(big.URL, small.URL))
	big.status.Store(http.StatusInternalServerError)
	for range 2 { // served by small after big failed them: big's breaker opens
		if code, body := g.call(t.Context(), false); code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
	}
	before := small.calls.Load()
	r := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(`{"endpoint":"/v1/chat/completions","body":`+settleBody+`}`))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs: %d %s", w.Code, w.Body.String())
	}
	taken, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	j, err := g.jobs.Take(taken)
	if err != nil {
		t.Fatal(err)
	}
	if o := g.attempt(t.Context(), j); o.Status != http.StatusOK {
		t.Fatalf("the job's attempt: %+v", o)
	}
	if got := small.calls.Load() - before; got != 1 {
		t.Errorf("small received %d of the job's calls; want 1: the gate admitted it there", got)
	}
	if got := big.calls.Load(); got != 2 {
		t.Errorf("big received %d calls; want only the 2 live calls that opened its breaker", got)
	}
}
