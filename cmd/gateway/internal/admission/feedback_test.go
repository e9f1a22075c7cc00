package admission

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

func TestAThrottleHalvesTheCallsInFlightToAProviderWithNoMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		var running []*Ticket
		for range 8 {
			running = append(running, mustAdmit(t, g, req))
		}
		g.Throttled("lab", time.Second) // answered to one of the 8
		if got := g.Usage(t.Context()).Providers[0].ThrottledInFlight; got != 4 {
			t.Fatalf("in-flight cap after one throttle with 8 calls in flight = %d; want 4", got)
		}
		admitted := make(chan *Ticket, 1)
		go func() {
			ticket, _ := g.Admit(t.Context(), req)
			admitted <- ticket
		}()
		time.Sleep(2 * time.Second) // past the pause
		synctest.Wait()
		for _, ticket := range running[:4] {
			ticket.Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatal("a call went with 4 in flight; want it held under the cap of 4")
		}
		running[4].Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		time.Sleep(time.Second)
		synctest.Wait()
		if len(admitted) != 1 {
			t.Fatal("a call still waits with 3 in flight under a cap of 4")
		}
		if ticket := <-admitted; ticket != nil {
			ticket.Refund()
		} else {
			t.Error("the call waiting was refused; want it let go")
		}
		for _, ticket := range running[5:] {
			ticket.Refund()
		}
	})
}

func TestTheThrottlesCapIsLiftedWhenTheShareGrowsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		req := request(t, p, "sk-acme-alice", 100)
		first := mustAdmit(t, g, req)
		g.Throttled("lab", time.Second)
		first.Refund()
		for range 32 { // one call at a time, each a success: a step each, from a half back to 1
			time.Sleep(time.Second)
			mustAdmit(t, g, req).Settle(estimate.Usage{PromptTokens: 50, CompletionTokens: 50})
		}
		if got := g.Usage(t.Context()).Providers[0].ThrottledInFlight; got != 0 {
			t.Errorf("in-flight cap after 32 successes = %d; want 0, none", got)
		}
	})
}

func TestLimitsReportedLowerThanConfiguredAreLearned(t *testing.T) {
	pl := plan{requestsPerMinute: 600, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
	g, _, _ := newGate(t, pl)
	steps := []struct {
		name        string
		reported    gatewayv1.LearnedLimits
		wantChanged bool
		want        gatewayv1.LearnedLimits
	}{
		{"both lower than configured", gatewayv1.LearnedLimits{RequestsPerMinute: 100, TokensPerMinute: 5000}, true, gatewayv1.LearnedLimits{RequestsPerMinute: 100, TokensPerMinute: 5000}},
		{"the same again", gatewayv1.LearnedLimits{RequestsPerMinute: 100, TokensPerMinute: 5000}, false, gatewayv1.LearnedLimits{RequestsPerMinute: 100, TokensPerMinute: 5000}},
		{"tokens only: requests kept", gatewayv1.LearnedLimits{TokensPerMinute: 4000}, true, gatewayv1.LearnedLimits{RequestsPerMinute: 100, TokensPerMinute: 4000}},
		{"requests as configured: forgotten", gatewayv1.LearnedLimits{RequestsPerMinute: 600}, true, gatewayv1.LearnedLimits{TokensPerMinute: 4000}},
		{"nothing reported", gatewayv1.LearnedLimits{}, false, gatewayv1.LearnedLimits{TokensPerMinute: 4000}},
	}
	for _, s := range steps {
		if got := g.Reported("lab", Reported{Limits: s.reported}); got != s.wantChanged {
			t.Errorf("%s: changed = %t; want %t", s.name, got, s.wantChanged)
		}
		if diff := cmp.Diff(map[string]gatewayv1.LearnedLimits{"lab": s.want}, g.Learned()); diff != "" {
			t.Errorf("%s: learned (-want +got):\n%s", s.name, diff)
		}
		if got := g.Usage(t.Context()).Providers[0].LearnedLimits; got == nil || *got != s.want {
			t.Errorf("%s: the snapshot's learned limits = %+v; want %+v", s.name, got, s.want)
		}
	}
}

// TestAnExhaustedLimitPausesTheQueueForAMoment checks that a provider's answer saying nothing is
// left pauses the queue until it resets, for at most minPause: a rolling minute earns capacity
// back all along.
func TestAnExhaustedLimitPausesTheQueueForAMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := plan{requestsPerMinute: 600_000, tokensPerMinute: 600_000_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}}
		g, _, p := newGate(t, pl)
		start := time.Now()
		g.Reported("lab", Reported{Exhausted: true, Reset: 500 * time.Millisecond})
		mustAdmit(t, g, request(t, p, "sk-acme-alice", 100)).Refund()
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Errorf("a call after the provider said nothing is left for 0.5s went after %s", waited)
		}
		start = time.Now()
		g.Reported("lab", Reported{Exhausted: true, Reset: time.Minute})
		mustAdmit(t, g, request(t, p, "sk-acme-alice", 100)).Refund()
		if waited := time.Since(start); waited != minPause {
			t.Errorf("a call after the provider said nothing is left until its minute resets went after %s; want %s", waited, minPause)
		}
		if got := g.Usage(t.Context()).Providers[0].ThrottledInFlight; got != 0 {
			t.Errorf("in-flight cap = %d; want 0: an exhausted limit is no throttle", got)
		}
	})
}

// TestShareIntervalGrowsWithTheLanesWaiting: a few lanes are exchanged every 200 ms; 5,000
// waiting tenants of one user each (10,001 lanes) once a second, so that the exchanges of one
// gateway keep to about a tenth of Redis's time.
func TestShareIntervalGrowsWithTheLanesWaiting(t *testing.T) {
	for lanes, want := range map[int]time.Duration{0: shareEvery, 3: shareEvery, 2000: shareEvery, 10_001: 1000100 * time.Microsecond} {
		if got := shareInterval(lanes); got != want {
			t.Errorf("shareInterval(%d) = %v; want %v", lanes, got, want)
		}
	}
}

// TestAGatewaysSlackIsTwoExchangesOfTheProvidersDrain: a gateway may get ahead of the least
// served one by what the provider lets through in two exchange intervals, so that a provider ten
// times larger, or exchanges five times further apart, give a slack as many times larger.
func TestAGatewaysSlackIsTwoExchangesOfTheProvidersDrain(t *testing.T) {
	for _, tokensPerMinute := range []int64{300_000, 3_000_000} {
		g, _, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: tokensPerMinute, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
		perSecond := float64(p.Provider("lab").SustainedPerMinute(ratelimit.Tokens)) / 60
		for _, interval := range []time.Duration{shareEvery, 5 * shareEvery} {
			if got, want := g.dispatcher("lab").gatewaySlack(interval), 2*interval.Seconds()*perSecond; math.Abs(got-want) > 1e-9 {
				t.Errorf("%d tokens a minute, exchanges %v apart: gateway slack %v; want %v", tokensPerMinute, interval, got, want)
			}
		}
	}
	g, _, _ := newGate(t, plan{requestsPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
	if got := g.dispatcher("lab").gatewaySlack(shareEvery); got != shareSlack {
		t.Errorf("a provider with no tokens per minute: gateway slack %v; want %v, a lane's", got, shareSlack)
	}
}

// TestTheDrainIsMeasuredInTheSecondsASharedLimitHeldTheQueue checks the door's drain rate: the
// provider's sustained tokens per minute until the queue has been held back by a limit it shares
// in enough recent seconds, then what it drained in those seconds only; a second in which the
// queue ran short of calls measures its callers, not its drain, and is left out.
func TestTheDrainIsMeasuredInTheSecondsASharedLimitHeldTheQueue(t *testing.T) {
	g, _, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
	d := g.dispatcher("lab")
	provider := float64(p.Provider("lab").SustainedPerMinute(ratelimit.Tokens)) / 60
	now := time.Unix(1_800_000_000, 0)
	d.mu.Lock()
	defer d.mu.Unlock()
	for age := range 5 { // the queue ran short: 10 tokens a second, nothing held it back
		d.drained.add(now.Add(-time.Duration(minFullSeconds+1+age)*time.Second), 10)
	}
	if got := drainRate(d, now); got != provider {
		t.Errorf("drain after seconds the queue ran short = %v; want %v, the provider's", got, provider)
	}
	for s := range minFullSeconds { // then full: 30 tokens a second while the provider held it
		at := now.Add(time.Duration(s-minFullSeconds)*time.Second + 500*time.Millisecond)
		d.drained.add(at, 30)
		d.heldBack(at)
	}
	if got := drainRate(d, now); got != 30 {
		t.Errorf("drain after %d full seconds = %v; want 30, what they drained", minFullSeconds, got)
	}
	if got := drainRate(d, now.Add(drainWindow+time.Second)); got != provider {
		t.Errorf("drain once the full seconds are older than the window = %v; want %v", got, provider)
	}
}

// TestACallTurnedAwayReckonsWithTheWholeProvider checks the drains the door reads when several
// gateways share the provider: a call let in reckons with this gateway's, an equal share among
// the replicas until it has measured its own; a call turned away, once the gateways have
// exchanged what waits on each, with the whole provider's, since its wait counts their lanes too;
// and with this gateway's again once an exchange fails.
func TestACallTurnedAwayReckonsWithTheWholeProvider(t *testing.T) {
	pl := plan{requestsPerMinute: 6000, tokensPerMinute: 6000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}, replicas: 4}
	g, _, p := newGate(t, pl)
	d := g.dispatcher("lab")
	provider := float64(p.Provider("lab").SustainedPerMinute(ratelimit.Tokens)) / 60
	now := time.Unix(1_800_000_000, 0)
	d.mu.Lock()
	defer d.mu.Unlock()
	rates := func() (float64, float64) {
		dr := d.drainAt(now, byKind{}, room{})
		return dr.rate(), d.wholeRate(dr)
	}
	if rate, whole := rates(); rate != provider/4 || whole != provider/4 {
		t.Errorf("before any exchange: %v and %v; want %v, a quarter of the provider's, for both", rate, whole, provider/4)
	}
	for s := range minFullSeconds {
		at := now.Add(time.Duration(s-minFullSeconds)*time.Second + 500*time.Millisecond)
		d.drained.add(at, 30)
		d.heldBack(at)
	}
	d.setElsewhere(elsewhereNews{known: true, others: []fairqueue.Backlog{{Lanes: 1, Queued: fairqueue.Load{Calls: 2, Tokens: 2000}}}})
	if rate, whole := rates(); rate != 30 || whole != provider {
		t.Errorf("once the gateways exchanged: %v and %v; want 30, as measured, and %v, the provider's", rate, whole, provider)
	}
	d.setElsewhere(elsewhereNews{})
	if rate, whole := rates(); rate != 30 || whole != 30 {
		t.Errorf("after a failed exchange: %v and %v; want 30 for both, as measured", rate, whole)
	}
}

// TestTheDrainCountsTheCallsInFlight checks the door's drain for a provider whose maxInFlight
// binds before its tokens a minute: this gateway's share of its calls at once, each of the
// queue's mean cost, each as long as the provider's calls took in the last minute; the pace alone
// before any call ended, and again once they are older than a minute; the whole provider's for a
// call turned away once the gateways exchanged what waits on each.
func TestTheDrainCountsTheCallsInFlight(t *testing.T) {
	g, _, p := newGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, maxInFlight: 4, replicas: 2,
		tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
	d := g.dispatcher("lab")
	pace := float64(p.Provider("lab").SustainedPerMinute(ratelimit.Tokens)) / 60 / 2
	now := time.Unix(1_800_000_000, 0)
	d.mu.Lock()
	defer d.mu.Unlock()
	arriving := byKind{1_000, 900, 100}
	rates := func(at time.Time) (float64, float64) {
		dr := d.drainAt(at, arriving, room{})
		return dr.rate(), d.wholeRate(dr)
	}
	if rate, _ := rates(now); rate != pace {
		t.Errorf("before any call ended: %v; want %v, the pace's share", rate, pace)
	}
	for _, took := range []time.Duration{8 * time.Second, 10 * time.Second, 12 * time.Second} {
		d.callEnded(took, now.Add(-time.Second))
	}
	d.setElsewhere(elsewhereNews{known: true, others: []fairqueue.Backlog{{Lanes: 1, Queued: fairqueue.Load{Calls: 2, Tokens: 2000}}}})
	// Two of the provider's four slots, calls of 1,000 tokens, 10 s each: 200 tokens a second.
	if rate, whole := rates(now); rate != 200 || whole != 400 {
		t.Errorf("calls of 10 s at two slots: %v and %v; want 200, and 400 at all four slots", rate, whole)
	}
	if rate, _ := rates(now.Add(time.Minute)); rate != pace {
		t.Errorf("once the calls that ended are a minute old: %v; want %v, the pace's share", rate, pace)
	}
}

// drainRate is the tokens a second the door expects d's queue to drain at now, for a call of no
// tokens. The caller holds d.mu.
func drainRate(d *dispatcher, now time.Time) float64 {
	dr := d.drainAt(now, byKind{}, room{})
	return dr.rate()
}

// TestWhatGoesAtOnceNeedsAFreeCallInFlight checks the tokens the door counts as going at once:
// what the provider's token limits hold, but, while its calls in flight hold the queue back
// sooner than its pace, no more than its free calls in flight carry; all the tokens hold while
// the calls' time is not known, or the provider has no maxInFlight.
func TestWhatGoesAtOnceNeedsAFreeCallInFlight(t *testing.T) {
	held := byKind{10_000, -1, -1}
	for _, c := range []struct {
		name     string
		slots    int64
		inFlight float64
		want     int64
	}{
		{"one call free of four calls of 1,000 tokens", 1, 100, 1_000},
		{"none free", 0, 100, 0},
		{"no call ended yet", 0, 0, 10_000},
		{"no maxInFlight", -1, 0, 10_000},
		{"the pace binds sooner", 0, 2_000, 10_000},
	} {
		dr := drain{held: held, slots: c.slots, calls: 4, mix: byKind{4_000, 3_000, 1_000}, inFlight: c.inFlight, paces: [kinds]float64{1_000}}
		if got := dr.headroom(); got != c.want {
			t.Errorf("%s: %d tokens go at once; want %d", c.name, got, c.want)
		}
	}
}
