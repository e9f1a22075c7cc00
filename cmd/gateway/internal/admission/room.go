package admission

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// room is what the limits a call waits for hold when it comes to the door, read without taking
// anything (see Gate.room).
type room struct {
	// own is how long the rate limits of the call's own user that queue take to let it through
	// once they are spent, and credit how long what they hold now lasts its lane (see
	// fairqueue.Queue.OwnWait).
	own, credit time.Duration
	// held is, for each kind of tokens, the least the provider's limits of that kind that queue
	// hold now: it goes at once, before the queue drains at its rate (see drain.headroom). Other
	// gateways sharing the provider could take it too, but a provider whose limits hold some is
	// one nobody's queue is draining. -1 for a kind the call's provider does not limit, or when
	// the store could not be read.
	held byKind
	// slots is how many calls the provider's maxInFlight lets go at once now: a call that finds
	// none free waits for one to end, whatever tokens its limits hold. -1 for a provider with no
	// maxInFlight, or when the store could not be read.
	slots int64
	// large reports that the call passes the burst of one of the provider's paces. Such a call
	// does not go as the queue drains its tokens: the pace lets it through when full, and the
	// provider's rolling minute once enough of it is past (see ratelimit.NewPace). until is how
	// long that takes were nothing else sent, for a large call.
	large bool
	until time.Duration
}

// room reads what the limits the call waits for hold (nothing when the store cannot answer). Of
// the rate limits of the call's own user that queue: how long they take to let it through once
// spent, the most over them of its cost over their rate, and how long what they hold lasts its
// lane, the least over them of what is left over their rate (zero and zero when its user has no
// such limit): a user's own limit, not the provider, may be what holds its lane back, and one
// limited to 2 calls a second waits half a second a call, however fast the provider drains. Of
// the provider's token limits that queue, of each kind, the least they hold, and, for a call
// past the burst of one of its paces, how long until they would all let it through; and how many
// calls its maxInFlight lets go now.
func (g *Gate) room(ctx context.Context, t *Ticket) room {
	r := room{held: byKind{-1, -1, -1}, slots: -1}
	var buf [ratelimit.MaxChecks]ratelimit.Check
	checks := buf[:0]
	for i, c := range t.checks {
		if !t.queueing.Queues(i) {
			continue
		}
		if inFlight(c.Limit) {
			checks = append(checks, ratelimit.Check{Limit: c.Limit, Cost: c.Cost})
			continue
		}
		if c.Limit.Rate() <= 0 {
			continue
		}
		switch _, tokens := kindOf(c.Limit.Dimension); {
		case c.Limit.Level == ratelimit.LevelUser:
			r.own = max(r.own, seconds(float64(c.Cost)/c.Limit.Rate()))
		case c.Limit.Level != ratelimit.LevelProvider || !tokens:
			continue
		case c.Cost > c.Limit.Capacity() && c.Limit.IsBucket():
			r.large = true
		}
		checks = append(checks, ratelimit.Check{Limit: c.Limit, Cost: c.Cost})
	}
	if len(checks) == 0 {
		return r
	}
	readings, err := t.limiter.Peek(ctx, checks, g.now())
	if err != nil {
		return room{own: r.own, held: r.held, slots: -1}
	}
	r.credit = -1
	for i, c := range checks {
		l := c.Limit
		if inFlight(l) {
			r.slots = max(readings[i].Remaining, 0)
			continue
		}
		if k, tokens := kindOf(l.Dimension); tokens && l.Level == ratelimit.LevelProvider {
			r.held[k] = leastOf(r.held[k], max(readings[i].Remaining, 0))
			if r.large {
				r.until = max(r.until, readings[i].Wait)
			}
			continue
		}
		r.credit = leastOf(r.credit, seconds(float64(readings[i].Remaining)/l.Rate()))
	}
	r.credit = max(r.credit, 0)
	return r
}

// inFlight reports whether l is the provider's maxInFlight.
func inFlight(l *ratelimit.Limit) bool {
	return l.Level == ratelimit.LevelProvider && l.Dimension == ratelimit.InFlight
}
