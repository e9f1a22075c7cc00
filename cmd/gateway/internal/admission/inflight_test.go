package admission

import (
	"testing"
	"testing/synctest"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/poll"
)

// inFlightPlan is a plan of two tenants on a provider that takes 10 calls at once: acme, whose
// calls at once its perTenant limit holds to two, and globex, with no limit of its own.
func inFlightPlan(onLimit gatewayv1.Behavior) plan {
	pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, maxInFlight: 10,
		tenants: []gatewayv1.Tenant{tenant("acme", "alice"), tenant("globex", "bob")}}
	pl.tenants[0].PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionInFlight, Amount: 2, OnLimit: onLimit}}
	return pl
}

var servedUsage = estimate.Usage{PromptTokens: 50, CompletionTokens: 50}

// TestAPlansCallsInFlightWaitInTheirOwnLane holds acme's two calls at once: its third waits in
// acme's lane, looked at again every inFlightPoll, while globex's calls go past it, and goes once
// one of acme's calls ends.
func TestAPlansCallsInFlightWaitInTheirOwnLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Memory: ratelimit.NewMemory()}
		g, p := newGateOn(t, inFlightPlan(gatewayv1.BehaviorQueue), store)
		acme := request(t, p, "sk-acme-alice", 100)
		running := []*Ticket{mustAdmit(t, g, acme), mustAdmit(t, g, acme)}
		third := make(chan *Ticket, 1)
		go func() {
			ticket, r := g.Admit(t.Context(), acme)
			if r != nil {
				t.Errorf("acme's third call = %+v; want it to wait for a slot", r)
			}
			third <- ticket
		}()
		synctest.Wait()
		before := int64(store.reads.Load())
		time.Sleep(time.Second)
		synctest.Wait()
		if got, most := int64(store.reads.Load())-before, int64(time.Second/inFlightPoll)+1; got > most {
			t.Errorf("the waiting call was decided %d times in a second; want at most %d, once every %s", got, most, inFlightPoll)
		}
		for i := range 5 {
			if _, r := g.Admit(t.Context(), request(t, p, "sk-globex-bob", 100)); r != nil {
				t.Fatalf("globex's call %d behind acme's waiting one = %+v; want it let go", i, r)
			}
			synctest.Wait()
			select {
			case <-third:
				t.Fatal("acme's third call went while its two calls ran")
			default:
			}
		}
		running[0].Settle(servedUsage)
		got := <-third
		if got == nil {
			return
		}
		if n := g.usage.inFlight("lab"); n != 2+5 {
			t.Errorf("calls in flight = %d; want acme's 2 and globex's 5", n)
		}
		running[1].Settle(servedUsage)
		got.Settle(servedUsage)
	})
}

// TestAPlansCallsInFlightAreHeldAcrossGateways runs two gateways on one store, memory (one
// process) or Redis: acme's two calls at once on one gateway hold its limit on the other, which
// refuses a third call at once when the limit rejects, with when to come back, or queues it when
// the limit queues, until a call ends on the first gateway.
func TestAPlansCallsInFlightAreHeldAcrossGateways(t *testing.T) {
	for store, newStore := range limiterStores {
		for _, onLimit := range []gatewayv1.Behavior{gatewayv1.BehaviorReject, gatewayv1.BehaviorQueue} {
			t.Run(store+"/"+string(onLimit), func(t *testing.T) {
				limiter := newStore(t)
				one, p := newGateOn(t, inFlightPlan(onLimit), limiter)
				other := New(Options{Limiter: limiter, Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }})
				t.Cleanup(other.Close)
				acme := request(t, p, "sk-acme-alice", 100)
				running := []*Ticket{mustAdmit(t, one, acme), mustAdmit(t, one, acme)}
				if onLimit == gatewayv1.BehaviorReject {
					checkRefusedInFlight(t, other, acme)
				} else {
					checkQueuedInFlight(t, other, acme, running[1])
				}
				running[0].Settle(servedUsage)
				mustAdmit(t, other, acme).Settle(servedUsage)
			})
		}
	}
}

// checkRefusedInFlight checks that g refuses req at once because its tenant's calls in flight
// are all held.
func checkRefusedInFlight(t *testing.T, g *Gate, req Request) {
	t.Helper()
	_, r := g.Admit(t.Context(), req)
	if r == nil || r.Reason != Limited || r.Level != ratelimit.LevelTenant || r.Dimension != ratelimit.InFlight {
		t.Fatalf("a third call at once = %+v; want limited by the tenant's calls in flight", r)
	}
	if r.Capacity != 2 || r.Remaining != 0 || r.Requested != 1 || r.RetryAfter != inFlightRetry {
		t.Errorf("refusal: capacity %d, remaining %d, requested %d, retry after %s; want 2, 0, 1 and %s",
			r.Capacity, r.Remaining, r.Requested, r.RetryAfter, inFlightRetry)
	}
}

// checkQueuedInFlight checks that g queues req while its tenant's calls in flight are all held,
// and lets it go once running ends.
func checkQueuedInFlight(t *testing.T, g *Gate, req Request, running *Ticket) {
	t.Helper()
	done := make(chan *Ticket, 1)
	go func() {
		ticket, r := g.Admit(t.Context(), req)
		if r != nil {
			t.Errorf("a third call at once = %+v; want it queued until a slot frees", r)
		}
		done <- ticket
	}()
	poll.Until(t, 10*time.Second, "the third call to queue", g.dispatcher("lab").waiting)
	select {
	case <-done:
		t.Fatal("the third call went while two ran")
	default:
	}
	running.Settle(servedUsage)
	select {
	case ticket := <-done:
		if ticket != nil {
			ticket.Settle(servedUsage)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third call still waits after a call ended")
	}
}
