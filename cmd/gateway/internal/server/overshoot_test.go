package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The overshoot test: a crowd of calls that set no completion cap, against a tenant whose
// budget and tokens a day allow a few of them, in front of a provider that, given no cap,
// writes far more than the model's default.
const (
	overshootCalls     = 100
	overshootAllowed   = 10     // calls the limits allow, at their estimate
	uncappedCompletion = 50_000 // what the provider writes when the call sets no cap
	overshootPrompt    = 12     // the prompt tokens the provider reports
	overshootKey       = "sk-crowd"
)

// overshootBody sets neither max_tokens nor max_completion_tokens.
const overshootBody = `{"model":"m","messages":[{"role":"user","content":"Write as much as you can."}]}`

// cappingProvider answers every chat with usage = the cap the call sent, or
// uncappedCompletion when it sent none. It bills what it reports, at the settle table's
// prices.
type cappingProvider struct {
	*httptest.Server
	mu     sync.Mutex
	billed charged
}

func newCappingProvider(t *testing.T) *cappingProvider {
	p := &cappingProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MaxTokens           *int64 `json:"max_tokens"`
			MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		completion := int64(uncappedCompletion)
		for _, limit := range []*int64{body.MaxTokens, body.MaxCompletionTokens} {
			if limit != nil {
				completion = min(completion, *limit)
			}
		}
		p.bill(overshootPrompt, completion)
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"..."}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, overshootPrompt, completion)
	}))
	t.Cleanup(p.Close)
	return p
}

// bill counts a call served: its tokens, and its dollars at $1 a million in and $2 out.
func (p *cappingProvider) bill(prompt, completion int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.billed.requests++
	p.billed.tokens += prompt + completion
	p.billed.micros += prompt + 2*completion
}

// total is what the provider billed so far.
func (p *cappingProvider) total() charged {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.billed
}

// overshootConfig allows the tenant allowed calls at estimate e: that many times its tokens a
// day and its dollars a month, both refusing at the limit. Tokens in cost $1 a million and out
// $2, so a token in is a micro-dollar and a token out two.
func overshootConfig(url string, e charged, allowed int64) *gatewayv1.Config {
	cfg := settleConfig(url)
	cfg.Providers[0].MaxInFlight = 0
	t := &cfg.Tenants[0]
	t.Keys = []gatewayv1.Key{{SHA256: gatewayv1.HashKey(overshootKey), User: "crowd"}}
	t.PerUser = nil
	t.PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionTokens, Amount: allowed * e.tokens, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject}}
	t.Budget = &gatewayv1.Budget{Amount: gatewayv1.MoneyFromMicro(allowed * e.micros), Period: gatewayv1.PeriodMonth}
	return cfg
}

// overshootGateway is a gateway on limiter with the overshoot limits, in front of provider.
func overshootGateway(t *testing.T, limiter admission.Limiter, providerURL string) (*Server, charged) {
	t.Helper()
	probe := newSettleGateway(t, providerURL)
	c, apiErr := probe.newCall(context.Background(), probe.policy, probe.policy.Caller(settleKey), "chat", []byte(overshootBody))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	e := charged{requests: 1, tokens: c.cost.Tokens, micros: c.cost.MicroDollars}
	cfg := overshootConfig(providerURL, e, overshootAllowed)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Limiter: limiter, Jobs: jobs.NewMemory(jobs.Options{})})
	s.SetPolicy(p)
	t.Cleanup(s.Close)
	return s, e
}

// TestCrowdWithoutCapsStaysWithinItsBudget sends overshootCalls calls at once, none with a
// completion cap, against limits that allow overshootAllowed of them at their estimate, on the
// memory and the Redis store, and checks that what the provider billed passes the tenant's
// limits by at most one call's estimate. It logs the overshoot it measured.
func TestCrowdWithoutCapsStaysWithinItsBudget(t *testing.T) {
	stores := []struct {
		name    string
		limiter func(t *testing.T) admission.Limiter
	}{
		{"memory", func(*testing.T) admission.Limiter { return ratelimit.NewMemory() }},
		{"redis", func(t *testing.T) admission.Limiter {
			return ratelimit.NewRedis(redisserver.Start(t).Client(t))
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			provider := newCappingProvider(t)
			s, e := overshootGateway(t, st.limiter(t), provider.URL)
			sendCrowd(s.Handler(), overshootCalls)
			got := provider.total()
			limit := charged{tokens: overshootAllowed * e.tokens, micros: overshootAllowed * e.micros}
			over := charged{tokens: got.tokens - limit.tokens, micros: got.micros - limit.micros}
			t.Logf("%d of %d calls served; tokens %d of %d (over by %d), dollars %s of %s (over by %s)",
				got.requests, overshootCalls, got.tokens, limit.tokens, max(over.tokens, 0),
				gatewayv1.MoneyFromMicro(got.micros), gatewayv1.MoneyFromMicro(limit.micros), gatewayv1.MoneyFromMicro(max(over.micros, 0)))
			if over.tokens > e.tokens || over.micros > e.micros {
				t.Errorf("the crowd passed its limits by %d tokens and %d micro-dollars; want at most one call's estimate, %d and %d",
					over.tokens, over.micros, e.tokens, e.micros)
			}
			if got.requests == 0 {
				t.Error("no call was served")
			}
		})
	}
}

// sendCrowd sends n overshoot calls at once to h.
func sendCrowd(h http.Handler, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(overshootBody))
			r.Header.Set("Authorization", "Bearer "+overshootKey)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
		})
	}
	wg.Wait()
}

// TestWithCap checks which field carries the cap the estimate assumed: the one the model's
// provider reads, where a client's own cap in the other chat field moves.
func TestWithCap(t *testing.T) {
	openai := &gatewayv1.Model{Name: "o3", DefaultMaxTokens: 256, MaxTokensParam: gatewayv1.MaxTokensParamCompletion}
	tgi := &gatewayv1.Model{Name: "llama", DefaultMaxTokens: 256, MaxTokensParam: gatewayv1.MaxTokensParamTokens}
	tests := []struct {
		name     string
		endpoint estimate.Endpoint
		body     string
		model    *gatewayv1.Model
		want     string
	}{
		{"chat to OpenAI", estimate.Chat, `{"model":"o3","messages":[{}]}`, openai,
			`{"max_completion_tokens":256,"model":"o3","messages":[{}]}`},
		{"chat to an engine that reads max_tokens", estimate.Chat, `{"model":"llama","messages":[{}]}`, tgi,
			`{"max_tokens":256,"model":"llama","messages":[{}]}`},
		{"completions always get max_tokens", estimate.Completions, `{"model":"o3","prompt":"hi"}`, openai,
			`{"max_tokens":256,"model":"o3","prompt":"hi"}`},
		{"the client's cap in the field its provider reads stays", estimate.Chat, `{"model":"o3","max_completion_tokens":5,"messages":[{}]}`, openai,
			`{"model":"o3","max_completion_tokens":5,"messages":[{}]}`},
		{"the client's cap moves to the field its provider reads", estimate.Chat, `{"model":"llama","max_completion_tokens":5,"messages":[{}]}`, tgi,
			`{"model":"llama","max_tokens":5,"messages":[{}]}`},
		{"embeddings have no cap", estimate.Embeddings, `{"model":"e","input":"hi"}`, openai,
			`{"model":"e","input":"hi"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := estimate.Parse(tc.endpoint, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, apiErr := withCap([]byte(tc.body), tc.endpoint, req, tc.model, false)
			if apiErr != nil {
				t.Fatal(apiErr.Message)
			}
			if string(got.bytes()) != tc.want {
				t.Errorf("withCap = %s, want %s", got, tc.want)
			}
		})
	}
}
