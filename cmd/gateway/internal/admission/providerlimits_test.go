package admission

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// withLimits is a plan's edit of its provider: these limits in its list, every other as the plan
// says.
func withLimits(limits ...gatewayv1.Limit) func(*gatewayv1.Provider) {
	return func(p *gatewayv1.Provider) { p.Limits = limits }
}

// perMinute is a provider's limit of n of d a minute.
func perMinute(d gatewayv1.Dimension, n int64) gatewayv1.Limit {
	return gatewayv1.Limit{Dimension: d, Amount: n, Per: gatewayv1.PeriodMinute}
}

// chat is a chat call of key with a prompt of input tokens and a cap of output, priced.
func chat(t *testing.T, p *policy.Policy, key string, input, output int64) Request {
	t.Helper()
	req := request(t, p, key, input+output)
	req.Cost.InputTokens, req.Cost.OutputTokens = input, output
	req.Cost.MicroDollars = req.Route.Prices.CostMicros("", gatewayv1.Tokens{Prompt: input, Completion: output})
	return req
}

// leftOf is what the limit of key among req's checks has left.
func leftOf(t *testing.T, limiter Limiter, req Request, key string) int64 {
	t.Helper()
	n, ok := left(t, limiter, req)[key]
	if !ok {
		t.Fatalf("the call passes no limit %s", key)
	}
	return n
}

// TestAnOutputLimitedProviderAdmitsByTheCapAndSettlesByTheUsage runs calls against a provider of
// 1,000 output tokens a minute, each output token counted weight times, beside a plan's 10,000 a
// day (a quota, which refills nothing while the test runs): a call takes its cap from both at admission (weight times from the provider's), and as
// it ends what it did not write comes back, so that a third call fits where the caps of three
// would not.
func TestAnOutputLimitedProviderAdmitsByTheCapAndSettlesByTheUsage(t *testing.T) {
	const minute, plans = "{lab}:provider:outputTokens:minute", "{tenant:acme}:tenant:outputTokens:day"
	for store, newStore := range limiterStores {
		for _, weight := range []int64{1, 5} {
			t.Run(fmt.Sprintf("%s/weight %d", store, weight), func(t *testing.T) {
				acme := tenant("acme", "alice")
				acme.PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionOutputTokens, Amount: 10_000, Per: gatewayv1.PeriodDay}}
				limiter := newStore(t)
				g, p := newGateOn(t, plan{requestsPerMinute: 6000, tenants: []gatewayv1.Tenant{acme}, provider: func(pr *gatewayv1.Provider) {
					pr.Limits, pr.OutputTokenWeight = []gatewayv1.Limit{perMinute(gatewayv1.DimensionOutputTokens, 1_000)}, int32(weight)
				}}, limiter)
				capped := 400 / weight // two calls' caps fit, three do not
				req := chat(t, p, "sk-acme-alice", 100, capped)
				first, second := mustAdmit(t, g, req), mustAdmit(t, g, req)
				if got, want := leftOf(t, limiter, req, minute), 1_000-2*capped*weight; got != want {
					t.Errorf("the provider's minute after two calls = %d; want %d, their caps %d times", got, want, weight)
				}
				if got, want := leftOf(t, limiter, req, plans), 10_000-2*capped; got != want {
					t.Errorf("the plan's day after two calls = %d; want %d, their caps once", got, want)
				}
				if r := g.TooLarge(chat(t, p, "sk-acme-alice", 100, 1_000/weight+1)); r == nil || r.Dimension != ratelimit.OutputTokens || r.Level != ratelimit.LevelProvider {
					t.Errorf("a call whose cap counts past the provider's minute: %+v; want too large for its output tokens", r)
				}
				first.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: 10 / weight})
				if got, want := leftOf(t, limiter, req, minute), 1_000-capped*weight-10; got != want {
					t.Errorf("the provider's minute after the first call wrote %d = %d; want %d", 10/weight, got, want)
				}
				third := mustAdmit(t, g, req)
				second.Settle(estimate.Usage{PromptTokens: 100, CompletionTokens: capped})
				third.Refund()
				if got, want := leftOf(t, limiter, req, plans), 10_000-10/weight-capped; got != want {
					t.Errorf("the plan's day at the end = %d; want %d: what the two served calls wrote", got, want)
				}
			})
		}
	}
}

// TestCacheReadsCountAtAProviderAsItSays settles a call that read most of its prompt from the
// provider's cache: a provider that leaves cache reads out (as Anthropic does) gives them back
// on its input and token limits, one that counts them (as OpenAI does) keeps them, and the plan's
// limits count every prompt token either way (on a day's quota, which refills nothing while the
// test runs, so that its count is exact).
func TestCacheReadsCountAtAProviderAsItSays(t *testing.T) {
	for _, counts := range []bool{true, false} {
		acme := tenant("acme", "alice")
		acme.PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionInputTokens, Amount: 50_000, Per: gatewayv1.PeriodDay}}
		g, limiter, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 20_000, tenants: []gatewayv1.Tenant{acme}, provider: func(pr *gatewayv1.Provider) {
			pr.Limits, pr.CachedInputCounts = []gatewayv1.Limit{perMinute(gatewayv1.DimensionInputTokens, 10_000)}, &counts
		}})
		req := chat(t, p, "sk-acme-alice", 2_000, 100)
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 2_000, CachedPromptTokens: 1_500, CompletionTokens: 100})
		counted := int64(500) // the prompt less what was read from the cache
		if counts {
			counted = 2_000
		}
		got := []int64{leftOf(t, limiter, req, "{lab}:provider:inputTokens:minute"), leftOf(t, limiter, req, "{lab}:provider:tokens:minute"),
			leftOf(t, limiter, req, "{tenant:acme}:tenant:inputTokens:day")}
		if want := []int64{10_000 - counted, 20_000 - counted - 100, 50_000 - 2_000}; !cmp.Equal(got, want) {
			t.Errorf("cachedInputCounts %v: the provider's input and tokens and the plan's input left %v; want %v", counts, got, want)
		}
	}
}

// TestAProvidersDayIsRefusedUntilItsMidnightOrWaitedOut spends a provider's day of two requests
// in Los Angeles: at 22:00 there a third call is refused at once, a spent quota whose Retry-After
// is the two hours to the provider's midnight; at 23:59:30, within the plan's maxWait of a
// minute, it waits in the queue and goes at midnight.
func TestAProvidersDayIsRefusedUntilItsMidnightOrWaitedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		la, err := time.LoadLocation("America/Los_Angeles")
		if err != nil {
			t.Fatal(err)
		}
		start, clock := time.Now(), time.Date(2026, 12, 7, 22, 0, 0, 0, la)
		var skipped atomic.Int64 // the clock set forward, in nanoseconds
		now := func() time.Time { return clock.Add(time.Since(start) + time.Duration(skipped.Load())) }
		p := plan{requestsPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}, provider: func(pr *gatewayv1.Provider) {
			pr.Limits, pr.TimeZone = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 2, Per: gatewayv1.PeriodDay}}, "America/Los_Angeles"
		}}.compile(t)
		g := New(Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }, Now: now})
		defer g.Close()
		req := chat(t, p, "sk-acme-alice", 10, 10)
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 10, CompletionTokens: 10})
		mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 10, CompletionTokens: 10})
		_, r := g.Admit(t.Context(), req)
		want := &Refusal{Reason: Limited, Level: ratelimit.LevelProvider, Dimension: ratelimit.Requests, Capacity: 2, Per: "a day", Remaining: 0, Requested: 1,
			Spent: true, RetryAfter: 2 * time.Hour}
		if diff := cmp.Diff(want, r, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Limits" }, cmp.Ignore())); diff != "" {
			t.Errorf("a third call at 22:00 (-want +got):\n%s", diff)
		}
		skipped.Store(int64(time.Hour + 59*time.Minute + 30*time.Second))
		ticket, r := g.Admit(t.Context(), req)
		if r != nil {
			t.Fatalf("a third call at 23:59:30: %+v; want it to wait the 30 s to midnight", r)
		}
		if ticket.Waited != 30*time.Second {
			t.Errorf("it waited %s; want 30s, until midnight in Los Angeles", ticket.Waited)
		}
		ticket.Refund()
	})
}

// TestAnthropicsInputAndOutputLimitsAreLearned reports Anthropic's input and output tokens a
// minute lower than configured: both are learned and compiled into the provider's limits, an
// input limit held at a hundredth of the configured, and forgotten when no answer reports them.
func TestAnthropicsInputAndOutputLimitsAreLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lg := newLearningGate(t, plan{requestsPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}, provider: withLimits(
			perMinute(gatewayv1.DimensionInputTokens, 400_000), perMinute(gatewayv1.DimensionOutputTokens, 80_000))})
		reported := gatewayv1.LearnedLimits{InputTokensPerMinute: 1_000, OutputTokensPerMinute: 16_000}
		if !lg.report(Reported{Limits: reported}) {
			t.Fatal("a report of lower input and output limits taught nothing")
		}
		want := gatewayv1.LearnedLimits{InputTokensPerMinute: 4_000, OutputTokensPerMinute: 16_000}
		if got := lg.learned(); got != want {
			t.Fatalf("learned %+v; want %+v", got, want)
		}
		req := chat(t, lg.policy.Load(), "sk-acme-alice", 100, 100)
		checks, _ := req.checks(nil, policy.Shared, "")
		capacities := map[string]int64{}
		for _, c := range checks {
			capacities[c.Limit.Key] = c.Limit.Capacity()
		}
		if got := []int64{capacities["{lab}:provider:inputTokens:minute"], capacities["{lab}:provider:outputTokens:minute"]}; !cmp.Equal(got, []int64{4_000, 16_000}) {
			t.Errorf("the provider's input and output minutes hold %v; want the learned [4000 16000]", got)
		}
		time.Sleep(learnedTTL)
		if !lg.forgetStale() || !lg.learned().IsZero() {
			t.Errorf("after %s with no answer: learned %+v; want none", learnedTTL, lg.learned())
		}
	})
}

// TestTheDoorEstimatesAQueueBoundByOutputTokens sends a provider of 600,000 tokens and 6,000
// output tokens a minute calls of 1,000 input and 1,000 output tokens, four at once (the output
// pace's burst of 4,096), and queues more until the door turns one away: the output pace binds,
// 6,000 × 59/61 output tokens a minute, 193 tokens of the queue's a second, so a plan's two
// minutes hold about a dozen calls, where the tokens a minute alone would let a hundred through.
func TestTheDoorEstimatesAQueueBoundByOutputTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acme := tenant("acme", "alice")
		acme.MaxWait = metav1.Duration{Duration: 2 * time.Minute}
		g, _, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{acme},
			provider: withLimits(perMinute(gatewayv1.DimensionOutputTokens, 6_000))})
		req := chat(t, p, "sk-acme-alice", 1_000, 1_000)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := range 4 {
			if _, r := g.Admit(ctx, req); r != nil {
				t.Fatalf("call %d refused: %+v", i, r)
			}
		}
		var refusal *Refusal
		queued := 0
		for ; queued < 100 && refusal == nil; queued++ {
			refusal = doorAnswer(ctx, g, &wg, req)
		}
		queued--
		if refusal == nil || refusal.Reason != Busy {
			t.Fatalf("Admit with %d calls ahead = %+v; want busy", queued, refusal)
		}
		rate := float64(6_000*59/61) / 60 * 2 // tokens of the queue a second: two for each output token
		least, most := seconds(float64((queued-1)*2_000)/rate), seconds(float64((queued+1)*2_000)/rate)
		if refusal.Estimate < least || refusal.Estimate > most {
			t.Errorf("with %d calls queued the door estimated %s; want between %s and %s, at the output pace", queued, refusal.Estimate, least, most)
		}
	})
}

// TestTheDrainIsTheSlowestOfTheProvidersPaces checks the door's model of the drain: the pace of
// the provider's tokens alone as before, the slowest of its paces over the queue's mix when it
// limits input or output tokens apart, and what a limit holds at once converted the same way.
func TestTheDrainIsTheSlowestOfTheProvidersPaces(t *testing.T) {
	none := byKind{-1, -1, -1}
	for _, tc := range []struct {
		name         string
		dr           drain
		rate         float64
		headroomWant int64
	}{
		{"tokens alone", drain{paces: [kinds]float64{100, 0, 0}, mix: byKind{3_000, 1_000, 2_000}, held: byKind{500, -1, -1}}, 100, 500},
		{"tokens alone, an empty call", drain{paces: [kinds]float64{100, 0, 0}, held: none}, 100, 0},
		{"output binds", drain{paces: [kinds]float64{10_000, 0, 100}, mix: byKind{1_500, 1_000, 500}, held: byKind{8_000, -1, 200}}, 300, 600},
		{"input binds", drain{paces: [kinds]float64{10_000, 50, 100}, mix: byKind{1_500, 1_000, 500}, held: none}, 75, 0},
		{"no output queued: the output limit holds nothing back", drain{paces: [kinds]float64{0, 0, 100}, mix: byKind{1_000, 1_000, 0}, held: byKind{-1, -1, 0}}, 0, 0},
		{"as measured", drain{measured: 42, paces: [kinds]float64{10_000, 0, 100}, mix: byKind{1_500, 1_000, 500}, held: none}, 42, 0},
		{"nothing limits it", drain{held: none}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.dr.rate(); got != tc.rate {
				t.Errorf("rate = %v; want %v", got, tc.rate)
			}
			if got := tc.dr.headroom(); got != tc.headroomWant {
				t.Errorf("headroom = %v; want %v", got, tc.headroomWant)
			}
		})
	}
}

// TestAPoolWeighsAProviderAtItsSlowestPace checks a provider's weight in its pools: the tokens a
// minute it lets through, as before for a provider that limits tokens alone, and at its output
// pace for calls its output tokens limit more.
func TestAPoolWeighsAProviderAtItsSlowestPace(t *testing.T) {
	tokensOnly := plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
	p := tokensOnly.compile(t)
	req := chat(t, p, "sk-acme-alice", 1_000, 1_000)
	if got, want := weight(req.choice()), float64(p.Provider("lab").SustainedPerMinute(ratelimit.Tokens)); got != want {
		t.Errorf("a provider of tokens alone weighs %v; want its sustained tokens a minute, %v", got, want)
	}
	outputBound := tokensOnly
	outputBound.provider = withLimits(perMinute(gatewayv1.DimensionOutputTokens, 6_000))
	p = outputBound.compile(t)
	req = chat(t, p, "sk-acme-alice", 1_000, 1_000)
	if got, want := weight(req.choice()), float64(6_000*59/61*2); got != want {
		t.Errorf("a provider of 6,000 output tokens a minute weighs %v for calls of half output; want %v", got, want)
	}
}

// TestALargeCallHoldsBackNoCallTheProvidersMinuteHasRoomFor sends, on a quiet provider of
// 300,000 tokens a minute, one call of 150,000 tokens: past the burst of the pace that spreads
// the minute (5,000 tokens), which it leaves 31 s in debt. Another tenant's calls of 1,000 tokens,
// which wait 8 s at most, go at once or at the pace, since the minute has room for them: they
// do not wait for the debt. A call of 20,000 tokens, past the pace's burst itself, does wait for
// it, and the door says so at once: it turns the call away with an estimate of the debt's 31 s
// rather than let it wait its 8 s out. The minute, which the provider counts, holds all of it.
func TestALargeCallHoldsBackNoCallTheProvidersMinuteHasRoomFor(t *testing.T) {
	const minute = "{lab}:provider:tokens:minute"
	for store, newStore := range limiterStores {
		t.Run(store, func(t *testing.T) {
			acme, globex := tenant("acme", "alice"), tenant("globex", "bob")
			globex.MaxWait.Duration = 8 * time.Second
			limiter := newStore(t)
			g, p := newGateOn(t, plan{requestsPerMinute: 6000, tokensPerMinute: 300_000, tenants: []gatewayv1.Tenant{acme, globex}}, limiter)
			large := mustAdmit(t, g, request(t, p, "sk-acme-alice", 150_000))
			defer large.Settle(estimate.Usage{PromptTokens: 100_000, CompletionTokens: 50_000})
			start := time.Now()
			small := request(t, p, "sk-globex-bob", 1_000)
			for i := range 5 {
				ticket, refusal := g.Admit(t.Context(), small)
				if refusal != nil {
					t.Fatalf("call %d of 1,000 tokens, %v after the large one: %+v; want it sent, the minute having room for it", i, time.Since(start), refusal)
				}
				defer ticket.Settle(estimate.Usage{PromptTokens: 500, CompletionTokens: 500})
			}
			if waited := time.Since(start); waited > 3*time.Second {
				t.Errorf("five calls of 1,000 tokens took %v behind the large call; want about a second of the pace, not its 31 s of debt", waited)
			}
			if got := leftOf(t, limiter, small, minute); got != 300_000-155_000 {
				t.Errorf("the provider's minute has %d left; want 145,000", got)
			}
			start = time.Now()
			_, refusal := g.Admit(t.Context(), request(t, p, "sk-globex-bob", 20_000))
			debt := seconds(155_000.0 / (300_000 * 59 / 61) * 60)
			if refusal == nil || refusal.Reason != Busy || time.Since(start) > time.Second ||
				refusal.Estimate < debt*85/100 || refusal.Estimate > debt*115/100 {
				t.Errorf("a call of 20,000 tokens after %v: %+v; want busy at once, with an estimate within 15%% of the pace's debt, %v", time.Since(start), refusal, debt)
			}
		})
	}
}

// TestALargeCallIsPromisedTheWaitForTheProvidersMinute sends a call of 100,000 tokens to a
// provider of 300,000 a minute, and then one of 250,000: it goes once the first has left the
// rolling minute, a minute after it, and the door, which turns it away for a maxWait of 30 s, says
// so. The door told it 52 s, the time the queue drains its tokens in; the pace is full after 21 s.
func TestALargeCallIsPromisedTheWaitForTheProvidersMinute(t *testing.T) {
	for store, newStore := range limiterStores {
		t.Run(store, func(t *testing.T) {
			acme, globex := tenant("acme", "alice"), tenant("globex", "bob")
			globex.MaxWait.Duration = 30 * time.Second
			g, p := newGateOn(t, plan{requestsPerMinute: 6000, tokensPerMinute: 300_000, tenants: []gatewayv1.Tenant{acme, globex}}, newStore(t))
			first := mustAdmit(t, g, request(t, p, "sk-acme-alice", 100_000))
			defer first.Settle(estimate.Usage{PromptTokens: 50_000, CompletionTokens: 50_000})
			_, refusal := g.Admit(t.Context(), request(t, p, "sk-globex-bob", 250_000))
			if refusal == nil || refusal.Reason != Busy {
				t.Fatalf("a call of 250,000 tokens after one of 100,000: %+v; want busy", refusal)
			}
			if refusal.Estimate < 59*time.Second || refusal.Estimate > 61*time.Second {
				t.Errorf("its estimate is %v; want the minute the first call counts in the provider's, 59 to 61 s", refusal.Estimate)
			}
			if refusal.RetryAfter > refusal.Estimate+time.Second { // in whole seconds, as the header says it
				t.Errorf("told to come back after %v, past its wait of %v", refusal.RetryAfter, refusal.Estimate)
			}
		})
	}
}

// TestACallHeldPastItsMaxWaitIsToldToComeBack lets in a call of 200,000 tokens on a provider of
// 300,000 a minute, one call at once, behind a call in flight. Another gateway then takes 200,000
// from the provider's minute; when the slot frees, the minute holds the call for a minute, past
// its maxWait of 30 s. It is answered busy, told to come back when the minute has room, as the
// door would have told it, not refused by the limit it was let in to wait for.
func TestACallHeldPastItsMaxWaitIsToldToComeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acme, globex := tenant("acme", "alice"), tenant("globex", "bob")
		globex.MaxWait.Duration = 30 * time.Second
		g, limiter, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 300_000, maxInFlight: 1, tenants: []gatewayv1.Tenant{acme, globex}})
		alice := mustAdmit(t, g, request(t, p, "sk-acme-alice", 1_000))
		bob := request(t, p, "sk-globex-bob", 200_000)
		answer := make(chan *Refusal, 1)
		go func() {
			ticket, refusal := g.Admit(t.Context(), bob)
			if ticket != nil {
				ticket.Settle(estimate.Usage{PromptTokens: 100_000, CompletionTokens: 100_000})
			}
			answer <- refusal
		}()
		synctest.Wait() // bob's call is let in, and waits for the slot
		var d ratelimit.Decision
		elsewhere := []ratelimit.Check{{Limit: providerMinute(t, bob), Cost: 200_000}}
		if err := limiter.Decide(t.Context(), elsewhere, time.Now(), &d); err != nil || !d.Allowed {
			t.Fatalf("another gateway's call of 200,000 tokens: %+v, %v", d, err)
		}
		alice.Settle(estimate.Usage{PromptTokens: 500, CompletionTokens: 500})
		r := <-answer
		if r == nil || r.Reason != Busy || r.RetryAfter < 59*time.Second || r.RetryAfter > 61*time.Second {
			t.Fatalf("bob's call: %+v; want busy, told to come back in about a minute", r)
		}
	})
}
