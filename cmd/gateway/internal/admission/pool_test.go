package admission

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/poll"
)

// poolGate is a gate whose model m is served by a pool of two providers, "east" and "west",
// each taking one call at a time, and whose breakers open at the first failure.
func poolGate(t *testing.T) (*Gate, *policy.Policy) {
	t.Helper()
	east := gatewayv1.Provider{
		Name: "east", BaseURL: "http://127.0.0.1:1/v1", Models: []gatewayv1.Model{{Name: "m"}},
		RequestsPerMinute: 1000, TokensPerMinute: 1_000_000, MaxInFlight: 1,
		Breaker: gatewayv1.Breaker{Failures: 1, OpenFor: metav1.Duration{Duration: time.Hour}},
	}
	west := east
	west.Name = "west"
	acme := tenant("acme", "alice")
	acme.Providers = []string{"east", "west"}
	cfg := &gatewayv1.Config{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{east, west}, Tenants: []gatewayv1.Tenant{acme}}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }})
	t.Cleanup(g.Close)
	return g, p
}

// pooled is a call of alice's to m, which either provider of the pool may serve.
func pooled(p *policy.Policy) Request {
	req := Request{Caller: p.Caller("sk-acme-alice"), Endpoint: gatewayv1.EndpointChat}
	for _, r := range p.Routes("m") {
		req.Pool = append(req.Pool, Choice{Route: r, Cost: policy.Cost{Tokens: 100}})
	}
	return req
}

// TestPoolMovesCallsOffABrokenProvider fills both providers of a pool, queues a third call, opens
// the breaker of the provider it waits for, and checks that the call moves to the other, which
// lets it go once its call in flight ends; with both breakers open, a call is answered that the
// providers are down.
func TestPoolMovesCallsOffABrokenProvider(t *testing.T) {
	g, p := poolGate(t)
	first, r := g.Admit(t.Context(), pooled(p))
	if r != nil {
		t.Fatalf("first call refused: %+v", r)
	}
	second, r := g.Admit(t.Context(), pooled(p))
	if r != nil {
		t.Fatalf("second call refused: %+v", r)
	}
	if first.Route().Provider.Name == second.Route().Provider.Name {
		t.Fatalf("both calls went to %s; want one to each provider, the least loaded", first.Route().Provider.Name)
	}
	type result struct {
		t *Ticket
		r *Refusal
	}
	third := make(chan result, 1)
	go func() {
		t, r := g.Admit(t.Context(), pooled(p))
		third <- result{t, r}
	}()
	var waiting string // the provider the third call waits for
	poll.Until(t, 10*time.Second, "the third call to queue", func() bool {
		for _, q := range g.Queues().Providers {
			if q.Queued == 1 {
				waiting = q.Name
			}
		}
		return waiting != ""
	})
	g.Attempted(waiting, false) // its breaker opens: the call moves
	other := first
	if first.Route().Provider.Name == waiting {
		other = second
	}
	other.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100})
	res := <-third
	if res.r != nil || res.t.Route().Provider.Name == waiting {
		t.Fatalf("the third call: %v, %+v; want it let go to the provider whose breaker is closed", res.t, res.r)
	}
	g.Attempted(res.t.Route().Provider.Name, false)
	if _, r := g.Admit(t.Context(), pooled(p)); r == nil || r.Reason != ProviderDown || r.RetryAfter != time.Hour {
		t.Errorf("with both breakers open: %+v; want ProviderDown, back in an hour", r)
	}
}

// TestPoolQueuedCallGoesWhereverFreesFirst fills both providers of a pool, queues a third call at
// one of them, and frees the other: the call goes there, as it waits for whichever of its
// providers frees first.
func TestPoolQueuedCallGoesWhereverFreesFirst(t *testing.T) {
	g, p := poolGate(t)
	first, r := g.Admit(t.Context(), pooled(p))
	if r != nil {
		t.Fatalf("first call refused: %+v", r)
	}
	second, r := g.Admit(t.Context(), pooled(p))
	if r != nil {
		t.Fatalf("second call refused: %+v", r)
	}
	third := make(chan *Ticket, 1)
	go func() {
		t, _ := g.Admit(t.Context(), pooled(p))
		third <- t
	}()
	var waiting string
	poll.Until(t, 10*time.Second, "the third call to queue", func() bool {
		for _, q := range g.Queues().Providers {
			if q.Queued == 1 {
				waiting = q.Name
			}
		}
		return waiting != ""
	})
	freed := first
	if first.Route().Provider.Name == waiting {
		freed = second
	}
	freed.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100})
	var got *Ticket
	select {
	case got = <-third:
	case <-time.After(10 * time.Second): // the provider that freed stays free: the call should have gone at once
		t.Fatalf("the third call still waits at %s, though %s is free", waiting, freed.Route().Provider.Name)
	}
	if got == nil || got.Route().Provider.Name != freed.Route().Provider.Name {
		t.Fatalf("the third call, queued at %s, went to %v; want %s, which freed first", waiting, got, freed.Route().Provider.Name)
	}
}
