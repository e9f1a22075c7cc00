package admission

import (
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The drain is how fast the door expects a provider's queue to drain, and what goes at once before
// it, in the queue's unit: the tokens the provider counts of a call (see Request.providerCost).
//
// A queue that a limit shared with others held back for enough of the last seconds drains at what
// it drained in them: whatever held it, that is its drain. Until then it drains at an equal share
// among the replicas of what the provider's token limits let through while a backlog lasts, or of
// what its calls in flight carry, when its maxInFlight binds sooner: that many calls at once,
// each of the queue's mean cost, each taking as long as the provider's calls took in the last
// minute. A call turned away waits longer, over which the gateways' shares change as their lanes
// are done: a queue that knows what waits on the other gateways sharing its provider (the last
// exchange of shares told it, see fairqueue.Queue.SetElsewhere) tells such a call when to come
// back behind their lanes' work too, at all that the provider lets through (see wholeRate).
//
// A provider may limit all of a call's tokens, its input tokens and its output tokens apart, each
// paced on its own, and a call goes when every one allows it. Each counts in its own unit, so
// each pace is converted at the queue's mix (what its calls take of that kind per token of the
// queue's unit), and the slowest binds. What the limits hold now goes at once, before the queue
// drains at its rate: the least of them, converted the same way.
//
// Worked example: a provider of 400,000 tokens and 8,000 output tokens a minute (after headroom),
// one gateway, and a queue of calls of 1,000 prompt tokens and a cap of 500 (their tokens 1,500,
// their output 500). The paces let 400,000 × 59/61 = 386,885 tokens and 8,000 × 59/61 = 7,737
// output tokens a minute through; the mix is 500/1,500 output tokens a token, so the output pace
// drains 7,737 × 1,500/500 = 23,211 tokens a minute, 387 a second, and binds. A call with
// 15,000 tokens before it in fair order waits about 39 s, less what the output limit holds now:
// with 2,000 output tokens left, 6,000 tokens go at once, and it waits about 23 s.

const (
	// drainWindow is how far back the door looks for the queue's drain, and minFullSeconds how
	// many of its seconds must have been full (see dispatcher.heldBack) for the measure to
	// replace the configured drain: a gateway's share of a provider swings from second to second
	// as the gateways sharing it take turns, so the measure spans many seconds.
	drainWindow    = 30 * time.Second
	minFullSeconds = 10
)

// kind is a kind of tokens a provider may limit apart.
type kind int

// The kinds: all of a call's tokens (the queue's unit), its input's and its output's.
const (
	allTokens kind = iota
	inputTokens
	outputTokens
	kinds
)

// byKind holds a count for each kind of tokens.
type byKind [kinds]int64

// counted are the limiter's dimensions of the kinds.
var counted = [kinds]ratelimit.Dimension{ratelimit.Tokens, ratelimit.InputTokens, ratelimit.OutputTokens}

// kindOf returns the kind of tokens a limit of dimension d counts; false for another dimension.
func kindOf(d ratelimit.Dimension) (kind, bool) {
	for k, dim := range counted {
		if dim == d {
			return kind(k), true
		}
	}
	return 0, false
}

// drain is what the door's estimates read of how the queue drains, gathered once per arrival.
type drain struct {
	// measured is the tokens a second the queue drained in the recent seconds a limit held it
	// back, when there were enough of them; zero otherwise.
	measured float64
	// paces are this gateway's share of what each kind of the provider's token limits lets
	// through a second while a backlog lasts, in that kind; zero for a kind it does not limit.
	paces [kinds]float64
	// inFlight is the tokens a second this gateway's share of the provider's calls in flight
	// carries: its share of maxInFlight, each call of the queue's mean cost, each taking as long
	// as the provider's calls took in the last minute; zero when the provider has no maxInFlight
	// or no call ended.
	inFlight float64
	// mix is what the queue's calls and the arriving one take of each kind together.
	mix byKind
	// held is the least each kind of the provider's token limits that queue holds now; -1 for a
	// kind none of them counts, or that could not be read.
	held byKind
	// slots is how many calls the provider's maxInFlight lets go now (-1 for none, see
	// room.slots), and calls how many calls the queue and the arriving one are.
	slots, calls int64
}

// tokensPer is how many tokens of the queue's unit its calls take per token of kind k; zero when
// they take none of k, which then holds the queue back not at all.
func (dr *drain) tokensPer(k kind) float64 {
	if k == allTokens {
		return 1
	}
	if dr.mix[allTokens] <= 0 || dr.mix[k] <= 0 {
		return 0
	}
	return float64(dr.mix[allTokens]) / float64(dr.mix[k])
}

// rate is the tokens a second the queue drains: as measured, else the slower of the provider's
// paces and its calls in flight; zero when none limits it.
func (dr *drain) rate() float64 {
	if dr.measured > 0 {
		return dr.measured
	}
	if dr.inFlightBinds() {
		return dr.inFlight
	}
	return dr.paced()
}

// paced is the tokens a second the slowest of the provider's paces lets through, at the queue's
// mix; zero when none limits it.
func (dr *drain) paced() float64 {
	var slowest float64
	for k := range kinds {
		per := dr.tokensPer(k)
		if dr.paces[k] <= 0 || per <= 0 {
			continue
		}
		if r := dr.paces[k] * per; slowest == 0 || r < slowest {
			slowest = r
		}
	}
	return slowest
}

// inFlightBinds reports whether the provider's calls in flight hold the queue back sooner than
// its paces.
func (dr *drain) inFlightBinds() bool {
	paced := dr.paced()
	return dr.inFlight > 0 && (paced == 0 || dr.inFlight < paced)
}

// headroom is the tokens that go at once, before the queue drains at its rate: the least that the
// provider's token limits hold, each at the queue's mix, and, when its calls in flight hold the
// queue back sooner than its paces, no more than its free calls in flight carry, each of the
// queue's mean cost; zero when none was read.
func (dr *drain) headroom() int64 {
	least := int64(-1)
	for k := range kinds {
		per := dr.tokensPer(k)
		if dr.held[k] < 0 || per <= 0 {
			continue
		}
		least = leastOf(least, int64(float64(dr.held[k])*per))
	}
	if dr.slots >= 0 && dr.calls > 0 && dr.inFlightBinds() {
		least = leastOf(least, dr.slots*dr.mix[allTokens]/dr.calls)
	}
	return max(least, 0)
}

// drainMeter measures the queue's drain: the tokens sent from it, the seconds a limit shared
// with others held it back, and how long the provider's calls take. It is kept under its
// dispatcher's lock.
type drainMeter struct {
	drained lastMinute // tokens dispatched from the queue, by second
	full    lastMinute // the seconds a limit shared with others held the queue back
	// callMillis and callsEnded are the milliseconds the calls served in the last minute took,
	// and how many they were.
	callMillis, callsEnded lastMinute
}

// callEnded records a call served that ended at now, which took so long.
func (m *drainMeter) callEnded(took time.Duration, now time.Time) {
	m.callMillis.add(now, took.Milliseconds())
	m.callsEnded.add(now, 1)
}

// callTime is how long the calls served in the last minute took, on average, in seconds; zero
// when none ended.
func (m *drainMeter) callTime(now time.Time) float64 {
	n := m.callsEnded.sum(now)
	if n == 0 {
		return 0
	}
	return float64(m.callMillis.sum(now)) / float64(n) / 1000
}

// heldBack records that a limit shared with other calls than the queue's next (the provider's,
// a global one, the calls in flight, a pause, the lanes of other gateways) held the queue back
// at now: this second measures the queue's drain.
func (m *drainMeter) heldBack(now time.Time) { m.full.add(now, 1) }

// measured is the tokens a second the queue drained in the seconds a limit held it back within
// drainWindow of now, when there were minFullSeconds of them; zero otherwise.
func (m *drainMeter) measured(now time.Time) float64 {
	if tokens, full := m.drained.sumWhere(now, drainWindow, &m.full); full >= minFullSeconds {
		return float64(tokens) / float64(full)
	}
	return 0
}

// drainAt gathers the queue's drain at now for a call of takes arriving, r being what the limits
// it waits for hold. The caller holds d.mu.
func (d *dispatcher) drainAt(now time.Time, takes byKind, r room) drain {
	dr := drain{held: r.held, slots: r.slots, measured: d.measured(now), calls: int64(d.q.Len())}
	for k := range kinds {
		dr.mix[k] = d.backlog[k] + takes[k]
	}
	if takes != (byKind{}) {
		dr.calls++
	}
	if p := d.g.policy().Provider(d.provider); p != nil {
		share := 1 / float64(max(d.g.policy().Replicas, 1))
		dr.paces = sharedPaces(p, share)
		dr.inFlight = d.inFlightDrain(p, share, int(dr.calls), dr.mix[allTokens], now)
	}
	return dr
}

// inFlightDrain is the tokens a second that the part share of p's maxInFlight carries, for calls
// calls of tokens in all, each taking as long as the provider's calls took in the last minute;
// zero when p has no maxInFlight, there are no calls, or none ended. The caller holds d.mu.
func (d *dispatcher) inFlightDrain(p *policy.Provider, share float64, calls int, tokens int64, now time.Time) float64 {
	took := d.callTime(now)
	if p.Config.MaxInFlight <= 0 || calls == 0 || took <= 0 {
		return 0
	}
	slots := float64(p.Config.WithHeadroom(p.Config.MaxInFlight)) * share
	return slots * float64(tokens) / float64(calls) / took
}

// wholeRate is the tokens a second the lanes of every gateway sharing the provider drain
// together, at dr's mix, when the queue knows what waits on the others: all that the provider's
// token limits let through while a backlog lasts, or its calls in flight carry. Otherwise dr's
// rate. The caller holds d.mu.
func (d *dispatcher) wholeRate(dr drain) float64 {
	p := d.g.policy().Provider(d.provider)
	if !d.elsewhere.known || p == nil {
		return dr.rate()
	}
	whole := drain{paces: sharedPaces(p, 1), mix: dr.mix, inFlight: dr.inFlight * float64(max(d.g.policy().Replicas, 1))}
	return whole.rate()
}

// sustained is the tokens a second p lets through, over every gateway, while a backlog of calls
// that take mix lasts: the slowest of its paces; zero when none limits it.
func sustained(p *policy.Provider, mix byKind) float64 {
	dr := drain{paces: sharedPaces(p, 1), mix: mix}
	return dr.rate()
}

// sharedPaces is the part share of what each kind of p's token limits lets through a second while
// a backlog lasts.
func sharedPaces(p *policy.Provider, share float64) [kinds]float64 {
	var out [kinds]float64
	for k, dim := range counted {
		out[k] = float64(p.SustainedPerMinute(dim)) / 60 * share
	}
	return out
}
