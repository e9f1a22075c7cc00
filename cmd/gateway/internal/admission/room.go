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
	// pace is how long until the provider's paces whose burst the call passes are full, as it
	// must find them (see ratelimit.NewPace): a call before it left them in debt.
	pace time.Duration
}

// room reads what the limits the call waits for hold (nothing when the store cannot answer). Of
// the rate limits of the call's own user that queue: how long they take to let it through once
// spent, the most over them of its cost over their rate, and how long what they hold lasts its
// lane, the least over them of what is left over their rate (zero and zero when its user has no
// such limit): a user's own limit, not the provider, may be what holds its lane back, and one
// limited to 2 calls a second waits half a second a call, however fast the provider drains. Of
// the provider's token limits that queue, of each kind, the least they hold, and how long until
// the paces whose burst the call passes are full.
func (g *Gate) room(ctx context.Context, t *Ticket) room {
	r := room{held: byKind{-1, -1, -1}}
	var buf [ratelimit.MaxChecks]*ratelimit.Limit
	limits := buf[:0]
	var pastBurst uint32 // bit j: limits[j] is a pace whose burst the call passes
	for i, c := range t.checks {
		if !t.queueing.Queues(i) || c.Limit.Rate() <= 0 {
			continue
		}
		switch _, tokens := kindOf(c.Limit.Dimension); {
		case c.Limit.Level == ratelimit.LevelUser:
			r.own = max(r.own, seconds(float64(c.Cost)/c.Limit.Rate()))
		case c.Limit.Level != ratelimit.LevelProvider || !tokens:
			continue
		case c.Cost > c.Limit.Capacity() && c.Limit.IsBucket():
			pastBurst |= 1 << len(limits)
		}
		limits = append(limits, c.Limit)
	}
	if len(limits) == 0 {
		return r
	}
	readings, err := t.limiter.Peek(ctx, limits, g.now())
	if err != nil {
		return room{own: r.own, held: r.held}
	}
	r.credit = -1
	for i, l := range limits {
		k, tokens := kindOf(l.Dimension)
		switch {
		case pastBurst&(1<<i) != 0 && readings[i].Reset > 0:
			r.pace, r.held[k] = max(r.pace, readings[i].Reset), 0 // the call waits for it full
		case tokens && l.Level == ratelimit.LevelProvider:
			r.held[k] = leastOf(r.held[k], max(readings[i].Remaining, 0))
		default:
			r.credit = leastOf(r.credit, seconds(float64(readings[i].Remaining)/l.Rate()))
		}
	}
	r.credit = max(r.credit, 0)
	return r
}
