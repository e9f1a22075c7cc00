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

// fullPool is a pool whose two providers each hold one call, with a third call waiting at one
// of them.
type fullPool struct {
	g *Gate
	p *policy.Policy
	// at holds each provider's call in flight, by the provider's name.
	at map[string]*Ticket
	// waiting is the provider the third call waits at, and third its ticket or refusal once it
	// has one.
	waiting string
	third   chan verdict
}

// fillPool admits a call to each provider of poolGate's pool, the least loaded first, and a third
// call, which waits.
func fillPool(t *testing.T) *fullPool {
	t.Helper()
	f := &fullPool{at: map[string]*Ticket{}, third: make(chan verdict, 1)}
	f.g, f.p = poolGate(t)
	for range 2 {
		ticket, r := f.g.Admit(t.Context(), pooled(f.p))
		if r != nil {
			t.Fatalf("a call refused: %+v", r)
		}
		f.at[ticket.Route().Provider.Name] = ticket
	}
	if len(f.at) != 2 {
		t.Fatalf("both calls went to one provider; want one to each, the least loaded")
	}
	go func() {
		ticket, r := f.g.Admit(t.Context(), pooled(f.p))
		f.third <- verdict{ticket: ticket, refusal: r}
	}()
	poll.Until(t, 10*time.Second, "the third call to queue", func() bool {
		for _, q := range f.g.Queues().Providers {
			if q.Queued == 1 {
				f.waiting = q.Name
			}
		}
		return f.waiting != ""
	})
	return f
}

// other is the provider the third call does not wait at.
func (f *fullPool) other() string {
	for name := range f.at {
		if name != f.waiting {
			return name
		}
	}
	return ""
}

// free ends the call in flight at provider.
func (f *fullPool) free(provider string) {
	f.at[provider].Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100})
}

// thirdCall is the third call's verdict, which must come within a bound: the provider it may go
// to is free.
func (f *fullPool) thirdCall(t *testing.T) verdict {
	t.Helper()
	select {
	case v := <-f.third:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("the third call still waits at %s, though %s is free", f.waiting, f.other())
		return verdict{}
	}
}

// TestPoolMovesCallsOffABrokenProvider opens the breaker of the provider a call waits for in a
// full pool, and checks that the call moves to the other, which lets it go once its call in
// flight ends; with both breakers open, a call is answered that the providers are down.
func TestPoolMovesCallsOffABrokenProvider(t *testing.T) {
	f := fillPool(t)
	f.g.Attempted(f.waiting, false) // its breaker opens: the call moves
	f.free(f.other())
	v := f.thirdCall(t)
	if v.refusal != nil || v.ticket.Route().Provider.Name != f.other() {
		t.Fatalf("the third call: %v, %+v; want it let go at %s, whose breaker is closed", v.ticket, v.refusal, f.other())
	}
	f.g.Attempted(f.other(), false)
	if _, r := f.g.Admit(t.Context(), pooled(f.p)); r == nil || r.Reason != ProviderDown || r.RetryAfter != time.Hour {
		t.Errorf("with both breakers open: %+v; want ProviderDown, back in an hour", r)
	}
}

// TestPoolQueuedCallGoesWhereverFreesFirst frees, in a full pool, the provider a call does not
// wait at: the call goes there, as it waits for whichever of its providers frees first.
func TestPoolQueuedCallGoesWhereverFreesFirst(t *testing.T) {
	f := fillPool(t)
	f.free(f.other())
	if v := f.thirdCall(t); v.ticket == nil || v.ticket.Route().Provider.Name != f.other() {
		t.Fatalf("the third call, queued at %s: %v, %+v; want it let go at %s, which freed first", f.waiting, v.ticket, v.refusal, f.other())
	}
}
