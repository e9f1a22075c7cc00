package ratelimit

import "time"

// state is one key's state, in nanoseconds since the Unix epoch where it holds a time.
//   - bucket: a is the theoretical arrival time (the bucket is full at a or before);
//   - window: a is the end of the window, b what was used in it;
//   - concurrency: b is the count in flight.
type state struct{ a, b int64 }

// evaluate checks cost on l, in state s, at now (ns): the pure core. It records the result as
// check i of d and returns the state to store if the whole decision allows, and whether this
// check passed. (Writing into d, rather than returning a result struct, keeps the hot path in
// registers.)
func (d *Decision) evaluate(i int, l *Limit, s state, cost, now int64) (state, bool) {
	if cost > l.capacity {
		// Refused before any arithmetic, which a huge cost would overflow.
		d.Remaining[i] = 0
		d.refuse(i, 0, true)
		return s, false
	}
	switch l.kind {
	case bucket:
		return d.evaluateBucket(i, l, s, cost, now)
	case window:
		return d.evaluateWindow(i, l, rollWindow(l, s, now), cost, now)
	default:
		return d.evaluateConcurrency(i, l, s, cost)
	}
}

func (d *Decision) evaluateBucket(i int, l *Limit, s state, cost, now int64) (state, bool) {
	interval := int64(l.interval)
	tolerance := l.capacity * interval
	tat := max(s.a, now)
	next := tat + cost*interval
	if earliest := next - tolerance; earliest > now {
		d.Remaining[i] = l.units(max(tolerance-(tat-now), 0))
		d.Reset[i] = time.Duration(tat - now)
		d.refuse(i, earliest-now, cost > l.capacity)
		return s, false
	}
	d.Remaining[i] = l.units(tolerance - (next - now))
	d.Reset[i] = time.Duration(next - now)
	return state{a: next}, true
}

// rollWindow starts a new window when now has passed the stored one's end.
func rollWindow(l *Limit, s state, now int64) state {
	if now < s.a {
		return s
	}
	_, end := l.calendar.Bounds(time.Unix(0, now))
	return state{a: end.UnixNano()}
}

func (d *Decision) evaluateWindow(i int, l *Limit, s state, cost, now int64) (state, bool) {
	d.Reset[i] = time.Duration(s.a - now)
	if s.b+cost > l.capacity {
		d.Remaining[i] = max(l.capacity-s.b, 0)
		d.refuse(i, s.a-now, cost > l.capacity)
		return s, false
	}
	d.Remaining[i] = l.capacity - s.b - cost
	return state{a: s.a, b: s.b + cost}, true
}

func (d *Decision) evaluateConcurrency(i int, l *Limit, s state, cost int64) (state, bool) {
	if s.b+cost > l.capacity {
		d.Remaining[i] = max(l.capacity-s.b, 0)
		d.refuse(i, 0, cost > l.capacity)
		return s, false
	}
	d.Remaining[i] = l.capacity - s.b - cost
	return state{b: s.b + cost}, true
}

// refuse records that check i refused and would pass after wait ns (never, if its cost is over
// its capacity). The decision reports the first refusing check and the longest wait.
func (d *Decision) refuse(i int, wait int64, never bool) {
	if d.Allowed {
		d.Allowed, d.Refused = false, i
	}
	d.RetryAfter = max(d.RetryAfter, time.Duration(wait))
	d.Never = d.Never || never
}

// reading is what l holds in state s at now (ns): what a decision of cost zero reports.
func reading(l *Limit, s state, now int64) Reading {
	var d Decision
	d.evaluate(0, l, s, 0, now)
	return Reading{Remaining: d.Remaining[0], Reset: d.Reset[0]}
}

// units returns how many whole units a bucket earns in ns nanoseconds: ns / interval, without a
// 64-bit division, which costs more than the rest of a decision on some processors.
func (l *Limit) units(ns int64) int64 {
	interval := int64(l.interval)
	q := int64(float64(ns) * l.perInterval)
	// The float estimate is off by at most one unit either way.
	if q*interval > ns {
		q--
	} else if (q+1)*interval <= ns {
		q++
	}
	return q
}

// settle adds delta (negative to refund) to s without checking the limit: the request already
// went, and what it really cost is owed. Nothing goes below empty.
func settle(l *Limit, s state, delta, now int64) state {
	// No real call is worth more than a few bursts; a larger delta is a bug or a lie, and would
	// overflow the arithmetic below.
	delta = min(max(delta, -4*l.capacity), 4*l.capacity)
	switch l.kind {
	case bucket:
		return state{a: max(max(s.a, now)+delta*int64(l.interval), now)}
	case window:
		s = rollWindow(l, s, now)
		return state{a: s.a, b: max(s.b+delta, 0)}
	default:
		return state{b: max(s.b+delta, 0)}
	}
}

// idle reports whether s is what a key with no state means, so the key can be dropped.
func idle(l *Limit, s state, now int64) bool {
	switch l.kind {
	case bucket:
		return s.a <= now
	case window:
		return s.a <= now || s.b == 0
	default:
		return s.b == 0
	}
}

// undo makes a refused decision report, for each check that passed, what it has left before
// this request, since nothing was taken.
func (d *Decision) undo(checks []Check, passed uint32) {
	for i, c := range checks {
		if passed&(1<<i) != 0 {
			d.Remaining[i] += c.Cost
		}
	}
}
