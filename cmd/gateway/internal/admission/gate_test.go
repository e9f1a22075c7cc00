package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/redisserver"
)

// plan is a test configuration: one provider, "lab", with the given limits per minute, and
// tenants each with one key per user, "sk-<tenant>-<user>". With second set, a provider of that
// name serves the model "m2" on the same terms. provider, when set, edits lab's configuration
// before it is defaulted.
type plan struct {
	requestsPerMinute, tokensPerMinute, maxInFlight int64
	tenants                                         []gatewayv1.Tenant
	second                                          string
	provider                                        func(*gatewayv1.Provider)
	prices                                          *gatewayv1.Prices // nil: $1 in and $2 out a million tokens
	replicas                                        int64             // the gateways sharing the limits; 0 is one
}

func tenant(name string, users ...string) gatewayv1.Tenant {
	t := gatewayv1.Tenant{Name: name, Providers: []string{"lab"}}
	for _, u := range users {
		t.Keys = append(t.Keys, gatewayv1.Key{SHA256: gatewayv1.HashKey("sk-" + name + "-" + u), User: u})
	}
	return t
}

func (pl plan) compile(t testing.TB) *policy.Policy {
	t.Helper()
	cfg := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "lab", BaseURL: "http://127.0.0.1:1/v1", HeadroomPercent: 100,
			Models:            []gatewayv1.Model{{Name: "m"}},
			RequestsPerMinute: pl.requestsPerMinute, TokensPerMinute: pl.tokensPerMinute, MaxInFlight: pl.maxInFlight,
			Prices: gatewayv1.Prices{InputPerMillion: "1.00", OutputPerMillion: "2.00"},
		}},
		Tenants: pl.tenants,
	}
	if pl.provider != nil {
		pl.provider(&cfg.Providers[0])
	}
	if pl.prices != nil {
		cfg.Providers[0].Prices = *pl.prices
	}
	if pl.second != "" {
		other := cfg.Providers[0]
		other.Name, other.Models = pl.second, []gatewayv1.Model{{Name: "m2"}}
		cfg.Providers = append(cfg.Providers, other)
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, max(pl.replicas, 1))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// limiterStores make the two stores a test runs on: memory, and a real redis-server of its own.
var limiterStores = map[string]func(t *testing.T) Limiter{
	"memory": func(*testing.T) Limiter { return ratelimit.NewMemory() },
	"redis":  func(t *testing.T) Limiter { return ratelimit.NewRedis(redisserver.Start(t).Client(t)) },
}

// newGate returns a gate on the memory store with the plan in force, closed when the test ends.
func newGate(t *testing.T, pl plan) (*Gate, *ratelimit.Memory, *policy.Policy) {
	limiter := ratelimit.NewMemory()
	g, p := newGateOn(t, pl, limiter)
	return g, limiter, p
}

// newGateOn returns a gate on limiter with the plan in force, closed when the test ends.
func newGateOn(t *testing.T, pl plan, limiter Limiter) (*Gate, *policy.Policy) {
	p := pl.compile(t)
	g := New(Options{Limiter: limiter, Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }})
	t.Cleanup(g.Close)
	return g, p
}

// failingStore is the memory store behind a connection that fails: its first failures
// settlements fail before they reach the store. It counts settlements tried and renewals.
type failingStore struct {
	*ratelimit.Memory
	failures          atomic.Int32
	settles, renewals atomic.Int32
}

func (s *failingStore) Settle(ctx context.Context, id string, checks []ratelimit.Check, now time.Time) error {
	s.settles.Add(1)
	if s.failures.Add(-1) >= 0 {
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	return s.Memory.Settle(ctx, id, checks, now)
}

func (s *failingStore) Renew(ctx context.Context, checks []ratelimit.Check, now time.Time) error {
	s.renewals.Add(1)
	return s.Memory.Renew(ctx, checks, now)
}

// request is a chat call of user's key costing tokens (half prompt, half completion).
func request(t *testing.T, p *policy.Policy, key string, tokens int64) Request {
	t.Helper()
	caller := p.Caller(key)
	if caller == nil {
		t.Fatalf("no caller for %s", key)
	}
	route := p.Routes("m")[0]
	return Request{Caller: caller, Route: route, Endpoint: gatewayv1.EndpointChat,
		Cost: policy.Cost{Tokens: tokens, MicroDollars: route.Prices.CostMicros("", gatewayv1.Tokens{Prompt: tokens / 2, Completion: tokens / 2})}}
}

// left reads what every limit of a request has left, by key, without taking anything.
func left(t *testing.T, limiter Limiter, req Request) map[string]int64 {
	t.Helper()
	checks, _ := policy.Checks(nil, req.Caller, req.Route, req.Endpoint, policy.Cost{}, policy.Shared, "")
	for i := range checks {
		checks[i].Cost = 0
	}
	var d ratelimit.Decision
	if err := limiter.Decide(context.Background(), checks, time.Now(), &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for i, c := range checks {
		out[c.Limit.Key] = d.Remaining[i]
	}
	return out
}

// budgetPlan is a plan whose tenant, acme, has a budget of $10 a month.
func budgetPlan() plan {
	pl := plan{requestsPerMinute: 600, tokensPerMinute: 600_000, maxInFlight: 10, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
	pl.tenants[0].Budget = &gatewayv1.Budget{Amount: "10.00", Period: gatewayv1.PeriodMonth}
	return pl
}

// mustAdmit admits a request that every limit allows.
func mustAdmit(t *testing.T, g *Gate, req Request) *Ticket {
	t.Helper()
	ticket, refusal := g.Admit(t.Context(), req)
	if refusal != nil {
		t.Fatalf("Admit refused: %+v", refusal)
	}
	return ticket
}

// TestSettleElsewhereBillsEachClassAtItsTier settles, under its lease, a call that asked for the
// priority tier and whose answer names none, 900 of its 1,000 prompt tokens cached: each class
// is charged at the priority tier's price, and counted as billed.
func TestSettleElsewhereBillsEachClassAtItsTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := budgetPlan()
		pl.prices = &gatewayv1.Prices{InputPerMillion: "1.00", CachedInputPerMillion: "0.10", OutputPerMillion: "2.00",
			Tiers: []gatewayv1.TierPrices{{Name: "priority", InputPerMillion: "2.00", CachedInputPerMillion: "0.20", OutputPerMillion: "4.00"}}}
		g, limiter, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 1000)
		req.ServiceTier = "priority"
		before := left(t, limiter, req)
		ticket := mustAdmit(t, g, req)
		u := estimate.Usage{PromptTokens: 1000, CachedPromptTokens: 900, CompletionTokens: 20, ReasoningTokens: 10}
		charged, err := g.SettleElsewhere(t.Context(), req, ticket.Lease(), ticket.Took(), u)
		if err != nil {
			t.Fatal(err)
		}
		ticket.Abandon()
		if want := int64(100*2 + 900*0.2 + 20*4); charged.MicroDollars != want {
			t.Errorf("charged %d micro-dollars; want %d, each class at the priority tier's price", charged.MicroDollars, want)
		}
		budget := p.Caller("sk-acme-alice").Tenant.Budget().Key
		if got, want := left(t, limiter, req)[budget], before[budget]-charged.MicroDollars; got != want {
			t.Errorf("budget left = %d; want %d", got, want)
		}
		for class, want := range map[string]float64{"input": 100, "cached_input": 900, "output": 20, "reasoning": 10, "audio_input": 0} {
			if got := testutil.ToFloat64(g.metrics.billed.WithLabelValues("acme", "lab", class)); got != want {
				t.Errorf("billed %s tokens = %v; want %v", class, got, want)
			}
		}
	})
}

func TestSettleChargesTheRealUsageOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, limiter, p := newGate(t, budgetPlan())
		req := request(t, p, "sk-acme-alice", 1000)
		before := left(t, limiter, req)
		ticket := mustAdmit(t, g, req)
		budget := p.Caller("sk-acme-alice").Tenant.Budget().Key
		if got, want := left(t, limiter, req)[budget], before[budget]-req.Cost.MicroDollars; got != want {
			t.Errorf("budget left while in flight = %d; want %d (the estimate taken)", got, want)
		}
		if !ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50}) {
			t.Fatal("Settle did not end the ticket")
		}
		if ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50}) || ticket.Refund() {
			t.Error("a second end of the ticket took effect")
		}
		after := left(t, limiter, req)
		if got, want := after[budget], before[budget]-req.Route.Prices.CostMicros("", gatewayv1.Tokens{Prompt: 100, Completion: 50}); got != want {
			t.Errorf("budget left after settling = %d; want %d (the real cost, once)", got, want)
		}
		for key, was := range before {
			if key != budget && after[key] > was {
				t.Errorf("%s: %d left after settling, more than the %d before", key, after[key], was)
			}
		}
		if n := g.usage.inFlight("lab"); n != 0 {
			t.Errorf("in flight after settling = %d; want 0", n)
		}
	})
}

func TestARunningCallRenewsItsSlotsUntilItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingStore{Memory: ratelimit.NewMemory()}
		g, p := newGateOn(t, budgetPlan(), store)
		ticket := mustAdmit(t, g, request(t, p, "sk-acme-alice", 1000))
		time.Sleep(policy.LeaseTTL - time.Second)
		synctest.Wait()
		if got := store.renewals.Load(); got != 2 {
			t.Errorf("renewals in %s of a call = %d; want 2, one every %s", policy.LeaseTTL-time.Second, got, renewEvery)
		}
		ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50})
		time.Sleep(2 * policy.LeaseTTL)
		synctest.Wait()
		if got := store.renewals.Load(); got != 2 {
			t.Errorf("renewals after the call ended = %d; want none more than the 2 before", got)
		}
	})
}

func TestACallWithNoSlotInFlightRenewsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingStore{Memory: ratelimit.NewMemory()}
		pl := plan{requestsPerMinute: 600, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, p := newGateOn(t, pl, store)
		ticket := mustAdmit(t, g, request(t, p, "sk-acme-alice", 1000))
		time.Sleep(policy.LeaseTTL)
		synctest.Wait()
		if got := store.renewals.Load(); got != 0 {
			t.Errorf("renewals of a call that holds no slot in flight = %d; want none", got)
		}
		ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50})
	})
}

// TestASettlementFreesTheProvidersMinuteWhereTheCallTookFromIt settles a call well after it went:
// its real use replaces its estimate in the second of the provider's rolling minute it was let
// go in, although nothing has been let go since.
func TestASettlementFreesTheProvidersMinuteWhereTheCallTookFromIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, limiter, p := newGate(t, budgetPlan())
		req := request(t, p, "sk-acme-alice", 1000)
		minute := "{lab}:provider:tokens:minute"
		before := left(t, limiter, req)[minute]
		ticket := mustAdmit(t, g, req)
		time.Sleep(10 * time.Second)
		ticket.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50})
		if got := left(t, limiter, req)[minute]; got != before-150 {
			t.Errorf("%s: %d left after the settlement; want %d, less the call's real 150 tokens", minute, got, before-150)
		}
	})
}

// TestAProviderThatCountsCharactersHoldsItsCountOnce admits calls that the provider counts at 855
// tokens (characters and max_tokens) and the encoding at 706, on both stores. The provider's
// rolling minute holds its count whatever the usage, or the usage when that is more: never its
// count and the usage's difference from the estimate on top; and it holds it for a call sent but
// not served, not for one withdrawn before it was sent.
func TestAProviderThatCountsCharactersHoldsItsCountOnce(t *testing.T) {
	settle := func(prompt, completion int64) func(*Ticket) bool {
		return func(t *Ticket) bool {
			return t.Settle(estimate.Usage{PromptTokens: prompt, CompletionTokens: completion})
		}
	}
	// A call sent and not served may have been counted: the provider's minute keeps its count.
	// One never sent is given back whole.
	ends := []struct {
		name string
		end  func(*Ticket) bool
		held int64
	}{
		{"settled at the provider's count", settle(805, 50), 855},
		{"settled at the encoding's usage, below the provider's count", settle(656, 30), 855},
		{"settled at a usage above the provider's count", settle(900, 50), 950},
		{"refunded", (*Ticket).Refund, 855},
		{"withdrawn", (*Ticket).Withdraw, 0},
	}
	for store, newStore := range limiterStores {
		for _, tc := range ends {
			t.Run(store+"/"+tc.name, func(t *testing.T) {
				limiter := newStore(t)
				g, p := newGateOn(t, budgetPlan(), limiter)
				req := request(t, p, "sk-acme-alice", 706)
				req.ProviderTokens = 855
				minute := providerMinute(t, req)
				before := peek(t, limiter, minute)
				ticket := mustAdmit(t, g, req)
				if got := before - peek(t, limiter, minute); got != 855 {
					t.Errorf("the call took %d of the provider's minute; want its count, 855", got)
				}
				tc.end(ticket)
				if got := before - peek(t, limiter, minute); got != tc.held {
					t.Errorf("the provider's minute holds %d after the call ended; want %d", got, tc.held)
				}
			})
		}
	}
}

// providerMinute is the rolling minute of the request's provider's tokens.
func providerMinute(t *testing.T, req Request) *ratelimit.Limit {
	t.Helper()
	checks, _ := policy.Checks(nil, req.Caller, req.Route, req.Endpoint, policy.Cost{}, policy.Shared, "")
	for _, c := range checks {
		if c.Limit.Key == "{lab}:provider:tokens:minute" {
			return c.Limit
		}
	}
	t.Fatal("the provider has no rolling minute of tokens")
	return nil
}

// peek reads what l has left, without taking anything.
func peek(t *testing.T, limiter Limiter, l *ratelimit.Limit) int64 {
	t.Helper()
	r, err := limiter.Peek(context.Background(), ratelimit.Reads(l), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r[0].Remaining
}

func TestAFailedSettlementIsTriedAgainUntilItLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingStore{Memory: ratelimit.NewMemory()}
		store.failures.Store(3)
		g, p := newGateOn(t, budgetPlan(), store)
		req := request(t, p, "sk-acme-alice", 1000)
		before := left(t, store.Memory, req)
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 50})
		time.Sleep(policy.LeaseTTL)
		synctest.Wait()
		if got := store.settles.Load(); got != 4 {
			t.Errorf("settlements tried = %d; want 4: three that failed, one that landed", got)
		}
		after := left(t, store.Memory, req)
		budget := p.Caller("sk-acme-alice").Tenant.Budget().Key
		if got, want := after[budget], before[budget]-req.Route.Prices.CostMicros("", gatewayv1.Tokens{Prompt: 100, Completion: 50}); got != want {
			t.Errorf("budget left = %d; want %d: the real cost, once", got, want)
		}
		inFlight := "{lab}:provider:inflight"
		if after[inFlight] != before[inFlight] {
			t.Errorf("slots in flight left = %d; want %d, the slot given back", after[inFlight], before[inFlight])
		}
	})
}

func TestASettlementThatNeverLandsIsGivenUpAfterALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingStore{Memory: ratelimit.NewMemory()}
		store.failures.Store(1 << 30)
		g, p := newGateOn(t, budgetPlan(), store)
		mustAdmit(t, g, request(t, p, "sk-acme-alice", 1000)).Refund()
		time.Sleep(policy.LeaseTTL)
		synctest.Wait()
		tried := store.settles.Load()
		if tried < 2 {
			t.Errorf("settlements tried in a lease = %d; want it tried again", tried)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := store.settles.Load(); got != tried {
			t.Errorf("settlements tried after a lease = %d; want no more than the %d of the lease", got, tried)
		}
	})
}

func TestRefundGivesEverythingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, limiter, p := newGate(t, budgetPlan())
		req := request(t, p, "sk-acme-alice", 1000)
		before := left(t, limiter, req)
		ticket := mustAdmit(t, g, req)
		ticket.Refund()
		after := left(t, limiter, req)
		for key, was := range before {
			if strings.Contains(key, ":provider:requests:") {
				continue // a request stays counted on the provider's own limits: it may have seen it
			}
			if after[key] != was {
				t.Errorf("%s: %d left after the refund; want %d, as before the call", key, after[key], was)
			}
		}
	})
}

func TestTicketEndsExactlyOnceUnderConcurrency(t *testing.T) {
	pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, maxInFlight: 1000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
	pl.tenants[0].Budget = &gatewayv1.Budget{Amount: "1000.00", Period: gatewayv1.PeriodMonth}
	g, limiter, p := newGate(t, pl)
	req := request(t, p, "sk-acme-alice", 1000)
	budget := p.Caller("sk-acme-alice").Tenant.Budget().Key
	before := left(t, limiter, req)[budget]
	const calls, enders = 50, 8
	var settled sync.WaitGroup
	ends := make(chan bool, calls*enders)
	for range calls {
		ticket := mustAdmit(t, g, req)
		for i := range enders {
			settled.Go(func() {
				if i%2 == 0 {
					ends <- ticket.Settle(estimate.Usage{PromptTokens: 10, CompletionTokens: 10})
				} else {
					ends <- ticket.Refund()
				}
			})
		}
	}
	settled.Wait()
	close(ends)
	ended := 0
	for e := range ends {
		if e {
			ended++
		}
	}
	if ended != calls {
		t.Errorf("%d ends took effect for %d tickets; want one each", ended, calls)
	}
	spent := before - left(t, limiter, req)[budget]
	perCall := req.Route.Prices.CostMicros("", gatewayv1.Tokens{Prompt: 10, Completion: 10})
	if spent%perCall != 0 || spent > calls*perCall || spent < 0 {
		t.Errorf("spent %d µ$; want a whole number of calls at %d µ$ each, at most %d", spent, perCall, calls)
	}
	if n := g.usage.inFlight("lab"); n != 0 {
		t.Errorf("in flight after every ticket ended = %d; want 0", n)
	}
}

// TestATwoProviderPlanSpendsOneBudget sends acme's calls to both of its providers: each spends
// the one budget, which the usage snapshot and the degrade threshold read as one.
func TestATwoProviderPlanSpendsOneBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := budgetPlan()
		pl.second = "lab2"
		pl.tenants[0].Providers = []string{"lab", "lab2"}
		g, _, p := newGate(t, pl)
		acme := p.Caller("sk-acme-alice").Tenant
		toLab := request(t, p, "sk-acme-alice", 1000)
		toLab2 := toLab
		toLab2.Route = p.Routes("m2")[0]
		costsFour := estimate.Usage{PromptTokens: 2_000_000, CompletionTokens: 1_000_000} // $4 at $1 and $2 a million

		mustAdmit(t, g, toLab).Settle(costsFour)
		if g.BudgetBelow(t.Context(), acme, 50) {
			t.Error("after $4 of $10 through lab: budget below 50%; want 60% left")
		}
		mustAdmit(t, g, toLab2).Settle(costsFour)
		if !g.BudgetBelow(t.Context(), acme, 50) || g.BudgetBelow(t.Context(), acme, 10) {
			t.Error("after $4 more through lab2: want the budget below 50% and above 10%: 20% left")
		}
		u := g.Usage(t.Context()).Tenants[0]
		if u.BudgetRemaining != "2" || u.SpendThisPeriod != "8" {
			t.Errorf("usage: %s left, %s spent; want 2 left of the one budget of 10, 8 spent through both providers", u.BudgetRemaining, u.SpendThisPeriod)
		}
	})
}

// admitted runs Admit in the background and sends the ticket's key on order once it is let go.
func admitted(t *testing.T, ctx context.Context, g *Gate, req Request, name string, order chan<- string, wg *sync.WaitGroup) {
	wg.Go(func() {
		ticket, refusal := g.Admit(ctx, req)
		if refusal != nil {
			order <- name + ": " + refusal.Reason.String()
			return
		}
		order <- name
		ticket.Settle(estimate.Usage{PromptTokens: req.Cost.Tokens / 2, CompletionTokens: req.Cost.Tokens / 2})
	})
}

func TestASmallTenantWaitsAtMostOneRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One call in any rolling minute: the first goes at once, and everything after waits in
		// the queue, one going each time the minute has rolled past the one before (61 s, since the
		// limit counts a second in full until it is wholly past); a wait of up to 10 minutes, so the
		// last of the eleven calls, 610 s away, is answered busy.
		pl := plan{requestsPerMinute: 1, tokensPerMinute: 6_000_000, tenants: []gatewayv1.Tenant{tenant("big", "bulk"), tenant("small", "one")}}
		for i := range pl.tenants {
			pl.tenants[i].MaxWait.Duration = 10 * time.Minute
		}
		g, _, p := newGate(t, pl)
		order := make(chan string, 64)
		var wg sync.WaitGroup
		for i := range 10 {
			admitted(t, t.Context(), g, request(t, p, "sk-big-bulk", 1000), fmt.Sprint("big-", i), order, &wg)
			synctest.Wait() // in this order
		}
		admitted(t, t.Context(), g, request(t, p, "sk-small-one", 1000), "small", order, &wg)
		wg.Wait()
		close(order)
		var got []string
		for name := range order {
			got = append(got, name)
		}
		at := -1
		for i, name := range got {
			if name == "small" {
				at = i
			}
		}
		// The first big call went at once; in the queue, the small tenant's lane gets its turn
		// after at most one round of the big tenant's: a quantum of 8,192 tokens, 8 calls.
		if at < 0 || at > 1+8 {
			t.Errorf("the small tenant's call went %dth of %v; want within the first round", at+1, got)
		}
	})
}

func TestTheDoorRefusesALongWaitBeforeCharging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 6,000 tokens in any rolling minute: a backlog drains at the pace, 59/61 of that a minute,
		// 96.7 tokens a second, and a lane with 6,000 tokens ahead waits 62 s. The first call refused waits 61 s
		// for the second its predecessors took to leave the minute: the plan waits up to 2 minutes.
		pl := plan{requestsPerMinute: 6000, tokensPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].MaxWait.Duration = 2 * time.Minute
		g, limiter, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 1000)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		// The minute's 6,000 tokens let six calls go; the rest queue, 1,000 tokens each.
		for i := range 6 {
			if _, r := g.Admit(ctx, req); r != nil {
				t.Fatalf("call %d refused: %+v", i, r)
			}
		}
		// Queue calls until the door turns one away: it answers at once, where a queued call waits.
		before := left(t, limiter, req)
		var refusal *Refusal
		queued := 0
		for ; queued < 100 && refusal == nil; queued++ {
			refusal = doorAnswer(ctx, g, &wg, req)
		}
		queued-- // the last one was turned away
		if refusal == nil || refusal.Reason != Busy {
			t.Fatalf("Admit with %d calls ahead = %+v; want busy", queued, refusal)
		}
		if after := left(t, limiter, req); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("limits after the door refused = %v; want %v, untouched", after, before)
		}
		if refusal.Position != queued+1 {
			t.Errorf("position = %d; want %d (the %d queued, then this call)", refusal.Position, queued+1, queued)
		}
		// The call's own slot of the drain: 1,000 tokens at 6,000 × 59/61 a minute, 10.34 s.
		soonest, slot := refusal.Estimate-time.Duration(comebackWait*float64(refusal.MaxWait)), time.Minute*61/354
		if refusal.Estimate <= refusal.MaxWait || refusal.RetryAfter < soonest || refusal.RetryAfter >= soonest+slot+time.Second || refusal.RetryAfter%time.Second != 0 {
			t.Errorf("estimate %s, maxWait %s, retry after %s; want an estimate past maxWait, and to come back once the wait is within its share comebackWait of it, within the call's slot of the drain (%s), in whole seconds",
				refusal.Estimate, refusal.MaxWait, refusal.RetryAfter, slot)
		}
		cancel()
		wg.Wait()
	})
}

// doorAnswer sends a call through g, in a bubble of synctest, and returns its refusal if the
// door answered at once, nil if it queued; a call let in later gives its ticket back.
func doorAnswer(ctx context.Context, g *Gate, wg *sync.WaitGroup, req Request) *Refusal {
	answered := make(chan *Refusal, 1)
	wg.Go(func() {
		ticket, r := g.Admit(ctx, req)
		if ticket != nil {
			ticket.Refund()
		}
		answered <- r
	})
	synctest.Wait()
	select {
	case r := <-answered:
		return r
	default:
		return nil
	}
}

// TestWhileUsersJoinTheDoorPromisesLittleBehindACallersOwnCalls has alice queue three calls,
// then bob join with one 6 s later and carol 1 s after him. Each first call is let in: whoever
// joins later waits behind it. Users kept joining through the last window, one in each of its
// halves as bob and carol each see it, so the door promises their second calls, which would wait
// behind their first, no more than the horizon (a tenth more lanes in 1.5 s at that pace) and
// turns them away before charging anything; a window later, with nobody joining, alice's next
// call is let in again.
func TestWhileUsersJoinTheDoorPromisesLittleBehindACallersOwnCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 6000, tokensPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice", "bob", "carol")}}
		pl.tenants[0].MaxWait.Duration = 2 * time.Minute
		g, limiter, p := newGate(t, pl)
		alice, bob, carol := request(t, p, "sk-acme-alice", 1000), request(t, p, "sk-acme-bob", 1000), request(t, p, "sk-acme-carol", 1000)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for i := range 6 { // the minute's pace lets six go
			if _, r := g.Admit(ctx, alice); r != nil {
				t.Fatalf("call %d refused: %+v", i, r)
			}
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		admit := func(req Request) *Refusal { return doorAnswer(ctx, g, &wg, req) }
		for i := range 3 {
			if r := admit(alice); r != nil {
				t.Fatalf("alice's queued call %d: %+v; want let in", i, r)
			}
		}
		time.Sleep(6 * time.Second)
		if r := admit(bob); r != nil {
			t.Fatalf("bob's first call: %+v; want let in, his lane's first", r)
		}
		time.Sleep(time.Second)
		if r := admit(carol); r != nil {
			t.Fatalf("carol's first call: %+v; want let in, her lane's first", r)
		}
		before := left(t, limiter, bob)
		for name, req := range map[string]Request{"bob": bob, "carol": carol} {
			r := admit(req)
			if r == nil || r.Reason != Busy || (r.Horizon-1500*time.Millisecond).Abs() > time.Millisecond || r.Estimate <= r.Horizon || r.MaxWait != 2*time.Minute {
				t.Errorf("%s's next call: %+v; want busy at the door, past a horizon of 1.5 s (lanes joining at two a window beside three)", name, r)
			}
		}
		if after := left(t, limiter, bob); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("limits after the door refused = %v; want %v, untouched", after, before)
		}
		time.Sleep(fairqueue.GrowthWindow)
		if r := admit(alice); r != nil {
			t.Errorf("alice's call a window after carol joined: %+v; want let in", r)
		}
	})
}

// TestAUsersOwnLimitSetsItsWaitAtTheDoor has a user limited to 2 calls a second (a burst of 5),
// on a provider that takes far more, send 30 calls at once. Five go; the next twenty queue, the
// k-th told it waits k half-seconds, which it does; the last five, whose wait would pass the
// plan's maxWait of 10.25 s, are turned away at the door, before anything is charged, and told to come
// back when the lane's wait is within half of it.
func TestAUsersOwnLimitSetsItsWaitAtTheDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].MaxWait.Duration = 10250 * time.Millisecond
		pl.tenants[0].PerUser = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 2, Per: gatewayv1.PeriodSecond, Burst: 5, OnLimit: gatewayv1.BehaviorQueue}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		type answer struct {
			ticket  *Ticket
			refusal *Refusal
		}
		answers := make([]chan answer, 30)
		var wg sync.WaitGroup
		for i := range answers {
			answers[i] = make(chan answer, 1)
			wg.Go(func() {
				ticket, refusal := g.Admit(t.Context(), req)
				answers[i] <- answer{ticket, refusal}
				if ticket != nil {
					ticket.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
				}
			})
			synctest.Wait() // in this order
		}
		wg.Wait()
		for i, ch := range answers {
			a := <-ch
			switch queued := i - 4; {
			case queued < 1:
				if a.ticket == nil || a.ticket.Waited != 0 {
					t.Errorf("call %d: %+v; want let go at once, on the burst", i+1, a)
				}
			case queued <= 20:
				want := time.Duration(queued) * 500 * time.Millisecond
				if a.ticket == nil || a.ticket.Estimated != want || a.ticket.Waited != want {
					t.Errorf("call %d: %+v, %+v; want an estimate of %s and that wait", i+1, a.ticket, a.refusal, want)
				}
			default:
				if r := a.refusal; r == nil || r.Reason != Busy || r.Waited != 0 || r.RetryAfter < 5375*time.Millisecond {
					t.Errorf("call %d: %+v; want busy at the door, to come back in 5.375 s or more (a wait of 10.5 s less half of maxWait)", i+1, a.refusal)
				}
			}
		}
	})
}

func TestACallerThatLeavesIsNotCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 1, tokensPerMinute: 6_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].Budget = &gatewayv1.Budget{Amount: "10.00", Period: gatewayv1.PeriodMonth}
		pl.tenants[0].MaxWait.Duration = 2 * time.Minute // the next request of the minute is 61 s away
		g, limiter, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 1000)
		first, r := g.Admit(t.Context(), req) // takes the only request of this rolling minute
		if r != nil {
			t.Fatalf("first call refused: %+v", r)
		}
		budget := p.Caller("sk-acme-alice").Tenant.Budget().Key
		before := left(t, limiter, req)[budget]
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan *Refusal)
		go func() {
			_, r := g.Admit(ctx, req)
			got <- r
		}()
		synctest.Wait()
		if n := g.Usage(t.Context()).Tenants[0].Queued; n != 1 {
			t.Fatalf("queued = %d; want the second call waiting", n)
		}
		cancel()
		if r := <-got; r == nil || r.Reason != Gone {
			t.Fatalf("a waiter whose caller left got %+v; want gone", r)
		}
		if n := g.Usage(t.Context()).Tenants[0].Queued; n != 0 {
			t.Errorf("queued after the caller left = %d; want 0", n)
		}
		time.Sleep(time.Minute + 2*time.Second) // long enough for the queue to have sent it, were it still there: the minute rolled past the first call
		synctest.Wait()
		if got := left(t, limiter, req)[budget]; got != before {
			t.Errorf("budget left = %d; want %d: the caller that left is not charged", got, before)
		}
		if n := g.usage.inFlight("lab"); n != 1 {
			t.Errorf("in flight = %d; want 1, the first call only", n)
		}
		first.Refund()
	})
}

func TestAThrottlePausesTheQueueAndHalvesTheShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, maxInFlight: 64, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		start := time.Now()
		g.Throttled("lab", 3*time.Second)
		ticket := mustAdmit(t, g, req)
		if waited := time.Since(start); waited < 3*time.Second {
			t.Errorf("a call after the provider asked for 3s went after %s", waited)
		}
		if got := g.dispatcher("lab").health.maxInFlight(); got != 32 {
			t.Errorf("in-flight cap after one throttle = %d; want 32, half of 64", got)
		}
		ticket.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		if got := g.Usage(t.Context()).Providers[0].Throttles; got != 1 {
			t.Errorf("throttles = %d; want 1", got)
		}
	})
}

func TestAThrottlePausesNoLongerThanTheRetryMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, maxInFlight: 64, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		maxDelay := p.Provider("lab").Config.Retry.MaxDelay.Duration
		start := time.Now()
		g.Throttled("lab", 1_000_000_000*time.Second)
		ticket := mustAdmit(t, g, req)
		if waited := time.Since(start); waited != maxDelay {
			t.Errorf("a call after the provider asked for 31 years went after %s; want the retry maxDelay, %s", waited, maxDelay)
		}
		ticket.Refund()
	})
}

func TestAQueuedCallIsAnsweredBusyAfterMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 60, tokensPerMinute: 6_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].MaxWait.Duration = 10 * time.Second
		g, _, p := newGate(t, pl)
		g.Throttled("lab", 30*time.Second) // the provider asks for more than the plan's maxWait
		start := time.Now()
		_, r := g.Admit(t.Context(), request(t, p, "sk-acme-alice", 100))
		if r == nil || r.Reason != Busy {
			t.Fatalf("Admit = %+v; want busy after maxWait", r)
		}
		if r.Waited != 10*time.Second || time.Since(start) != 10*time.Second {
			t.Errorf("waited %s (%s by the clock); want the plan's 10s", r.Waited, time.Since(start))
		}
		if r.RetryAfter <= 0 {
			t.Errorf("retry after %s; want a positive wait", r.RetryAfter)
		}
	})
}

func TestALimitThatRejectsAnswersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].PerUser = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 2, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		for range 2 {
			ticket := mustAdmit(t, g, req)
			ticket.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		}
		_, r := g.Admit(t.Context(), req)
		if r == nil || r.Reason != Limited || r.Level != ratelimit.LevelUser || r.Dimension != ratelimit.Requests {
			t.Fatalf("third call of two a day = %+v; want limited by the user's requests", r)
		}
		if r.RetryAfter <= 0 || r.Limits.Requests.Capacity != 2 || r.Limits.Requests.Remaining != 0 {
			t.Errorf("refusal says retry after %s, limits %+v; want a wait until midnight and 0 of 2 left", r.RetryAfter, r.Limits.Requests)
		}
	})
}

func TestACallLargerThanALimitIsRefusedForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600, tokensPerMinute: 20_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		r := g.TooLarge(request(t, p, "sk-acme-alice", 1_000_000))
		if r == nil || r.Reason != TooLarge || r.Dimension != ratelimit.Tokens || r.Retryable() {
			t.Fatalf("TooLarge = %+v; want a refusal on tokens that no wait fixes", r)
		}
		if _, r := g.Admit(t.Context(), request(t, p, "sk-acme-alice", 1_000_000)); r == nil || r.Reason != TooLarge {
			t.Errorf("Admit = %+v; want too large", r)
		}
	})
}

// TestACallLargerThanTheProvidersPaceGoesWhenThePaceIsFull admits, on a quiet provider of
// 200,000 tokens a minute, a call of 150,000: more than the burst of the pace that spreads the
// provider's minute (a second of it), but within the minute, as the provider takes it. Only a call
// past the whole minute is refused for good, and told the minute's limit as configured.
func TestACallLargerThanTheProvidersPaceGoesWhenThePaceIsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600, tokensPerMinute: 200_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		large := request(t, p, "sk-acme-alice", 150_000)
		if r := g.TooLarge(large); r != nil {
			t.Fatalf("TooLarge(150,000 tokens) = %+v; want none: the provider's minute holds it", r)
		}
		mustAdmit(t, g, large).Settle(estimate.Usage{PromptTokens: 100_000, CompletionTokens: 50_000})
		if r := g.TooLarge(request(t, p, "sk-acme-alice", 200_001)); r == nil || r.Reason != TooLarge || r.Capacity != 200_000 || r.Per != "a minute" {
			t.Errorf("TooLarge(200,001 tokens) = %+v; want refused for good, past the minute's 200,000 a minute", r)
		}
	})
}

// TestTheDoorCountsWhatTheProvidersPaceLetsThroughAtOnce queues two of bob's calls of 3,000
// tokens behind alice's call in flight, the provider's only slot. The provider's pace still holds
// what alice's call left of it: bob's first goes at once when alice's ends, and his second once
// the pace has refilled what the first took past it. The door's estimate of the second is that
// wait, the pace's headroom before the drain at its rate, not both calls at the rate.
func TestTheDoorCountsWhatTheProvidersPaceLetsThroughAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 60_000, maxInFlight: 1, tenants: []gatewayv1.Tenant{tenant("acme", "alice", "bob")}}
		g, _, p := newGate(t, pl)
		alice := mustAdmit(t, g, request(t, p, "sk-acme-alice", 1000))
		bob := request(t, p, "sk-acme-bob", 3000)
		second := make(chan *Ticket, 1)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				ticket, refusal := g.Admit(t.Context(), bob)
				if refusal != nil {
					t.Errorf("bob's call %d: %+v; want let in", i+1, refusal)
					return
				}
				ticket.Settle(estimate.Usage{PromptTokens: 1500, CompletionTokens: 1500})
				if i == 1 {
					second <- ticket
				}
			})
			synctest.Wait() // in this order
		}
		pace, rate := providerPace(t, bob)
		alice.Settle(estimate.Usage{PromptTokens: 500, CompletionTokens: 500})
		wg.Wait()
		got := <-second
		want := seconds(float64(3000-(pace-1000-3000)) / rate)
		if near := func(d time.Duration) bool { return (d - want).Abs() <= time.Millisecond }; !near(got.Estimated) || !near(got.Waited) {
			t.Errorf("bob's second call: estimated %v, waited %v; want %v both (the pace's %d tokens, then %.0f a second)", got.Estimated, got.Waited, want, pace, rate)
		}
	})
}

// providerPace is what the provider's pace of tokens holds when full, and its rate.
func providerPace(t *testing.T, req Request) (int64, float64) {
	t.Helper()
	checks, _ := policy.Checks(nil, req.Caller, req.Route, req.Endpoint, policy.Cost{}, policy.Shared, "")
	for _, c := range checks {
		if l := c.Limit; l.Level == ratelimit.LevelProvider && l.Dimension == ratelimit.Tokens && strings.HasSuffix(l.Key, ":pace") {
			return l.Capacity(), l.Rate()
		}
	}
	t.Fatal("no pace of tokens for the provider")
	return 0, 0
}

// TestAJobDoesNotWaitOnItsOwnLimits has a job's attempt find its tenant's tokens spent: it is
// refused at once, with when to come back, where a live call would wait in the queue.
func TestAJobDoesNotWaitOnItsOwnLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionTokens, Amount: 150, Per: gatewayv1.PeriodMinute}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		req.Job = jobs.Attempt{Job: "job_1", N: 1}
		start := time.Now()
		_, r := g.Admit(t.Context(), req)
		if r == nil || r.Reason != Limited || r.Level != ratelimit.LevelTenant || r.RetryAfter <= 0 {
			t.Fatalf("the job's Admit = %+v; want limited by its tenant, with a time to come back", r)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the job waited %s; want none: it goes back to the jobs' queue", waited)
		}
	})
}

// TestAJobIsChargedItsRequestOnceWhenCreated charges a job's creation against a tenant allowed 2
// requests a minute: a job its store refused gives it back, once; the job's attempt takes no
// other, so a live call still fits, and a third request, a job's creation, is refused.
func TestAJobIsChargedItsRequestOnceWhenCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 2, Per: gatewayv1.PeriodMinute, OnLimit: gatewayv1.BehaviorReject}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		if r := g.ChargeJob(t.Context(), req); r != nil {
			t.Fatalf("a job's creation: %+v; want it charged", r)
		}
		g.RefundJob(t.Context(), req, "job_0") // its store refused it: given back, once
		g.RefundJob(t.Context(), req, "job_0")
		if r := g.ChargeJob(t.Context(), req); r != nil {
			t.Fatalf("the first job's creation: %+v; want it charged", r)
		}
		job := req
		job.Job = jobs.Attempt{Job: "job_1", N: 1}
		var buf [ratelimit.MaxChecks]ratelimit.Check
		checks, _ := job.checks(buf[:0], policy.Shared, "")
		for _, c := range checks {
			if c.Limit.Dimension == ratelimit.Requests && c.Limit.Level < ratelimit.LevelGlobal && c.Cost != 0 {
				t.Errorf("the job's attempt takes %d from %s; want nothing, its creation took it", c.Cost, c.Limit.Key)
			}
		}
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		r := g.ChargeJob(t.Context(), req)
		if r == nil || r.Reason != Limited || r.Level != ratelimit.LevelTenant || r.RetryAfter <= 0 {
			t.Errorf("a third request's job: %+v; want limited by its tenant, with a time to come back", r)
		}
	})
}

func TestAJobAttemptTakenOverIsRefusedAndHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := jobs.NewMemory(jobs.Options{MaxAttempts: 3, ReclaimAfter: time.Second})
		limiter := ratelimit.NewMemory()
		p := budgetPlan().compile(t)
		g := New(Options{Limiter: limiter, Jobs: store, Policy: func() *policy.Policy { return p }})
		t.Cleanup(g.Close)
		job := &jobs.Job{Tenant: "acme", TenantID: "acme", User: "alice", Endpoint: "/v1/chat/completions", Body: []byte(`{}`)}
		if err := store.Add(t.Context(), job); err != nil {
			t.Fatal(err)
		}
		first, _ := store.Take(t.Context())
		if _, err := store.Finish(t.Context(), first.Attempt(), jobs.Outcome{Err: "the replica running it stopped", Retry: true}); err != nil {
			t.Fatal(err)
		}
		second, _ := store.Take(t.Context()) // the job is the second attempt's now
		req := request(t, p, "sk-acme-alice", 1000)
		before := left(t, limiter, req)
		req.Job = first.Attempt()
		if ticket, refusal := g.Admit(t.Context(), req); ticket != nil || refusal == nil || refusal.Reason != Superseded {
			t.Fatalf("the first attempt admitted after the job was taken again: %v, %+v; want refused, Superseded", ticket, refusal)
		}
		if after := left(t, limiter, req); !maps.Equal(after, before) {
			t.Errorf("limits left after a superseded attempt: %v; want all as before, %v", after, before)
		}
		req.Job = second.Attempt()
		mustAdmit(t, g, req).Refund()
	})
}

// TestACrowdTurnedAwayComesBackSpreadAtTheDrainRate fills a queue to its door, then turns away
// five more calls at once: each is told to come back once the lane has room and after those told
// before it, one slot of the drain later (its cost over the rate), never all at the same second.
func TestACrowdTurnedAwayComesBackSpreadAtTheDrainRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 6,000 tokens in any rolling minute: a backlog drains at the pace, 59/61 of that a minute,
		// and a call of 1,000 tokens is a slot of 10.34 s. The first call refused waits 61 s for the second its
		// predecessors took to leave the minute: the plan waits up to 2 minutes.
		const slot = time.Minute * 61 / 354
		pl := plan{requestsPerMinute: 6000, tokensPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		pl.tenants[0].MaxWait.Duration = 2 * time.Minute
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 1000)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		var turnedAway []*Refusal
		for range 100 {
			answered := make(chan *Refusal, 1)
			wg.Go(func() {
				ticket, r := g.Admit(ctx, req)
				if ticket != nil {
					<-ctx.Done() // held: what it took stays taken until the test ends
					ticket.Refund()
				}
				answered <- r
			})
			synctest.Wait()
			select {
			case r := <-answered:
				if r != nil {
					turnedAway = append(turnedAway, r)
				}
			default:
			}
			if len(turnedAway) == 6 {
				break
			}
		}
		if len(turnedAway) != 6 {
			t.Fatalf("%d calls turned away; want 6", len(turnedAway))
		}
		soonest := turnedAway[0].Estimate - time.Duration(comebackWait*float64(turnedAway[0].MaxWait))
		for i, r := range turnedAway {
			// A point of the call's slot, rounded up to whole seconds as Retry-After says it.
			from := soonest + time.Duration(i)*slot
			if r.Reason != Busy || r.RetryAfter < from || r.RetryAfter >= from+slot+time.Second || r.RetryAfter%time.Second != 0 {
				t.Errorf("call %d turned away: %s, come back after %s; want busy, whole seconds within [%s, %s)", i, r.Reason, r.RetryAfter, from, from+slot+time.Second)
			}
		}
		cancel()
	})
}
