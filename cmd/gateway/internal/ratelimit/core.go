package ratelimit

import "time"

// state is one key's state, in nanoseconds since the Unix epoch where it holds a time.
//   - bucket: a is the theoretical arrival time (the bucket is full at a or before);
//   - window: a is the end of the window, b what was used in it;
//   - concurrency: b is the count in flight.
type state struct{ a, b int64 }

// outcome is one check's result against one state.
type outcome struct {
	ok        bool
	never     bool
	wait      int64 // ns until it would pass, when not ok
	remaining int64
	reset     int64 // ns until the limit is whole again
	next      state // the state to store when the decision allows
}

// evaluate is the pure core: the check of cost on l, in state s, at now (ns).
func evaluate(l *Limit, s state, cost, now int64) outcome {
	switch l.kind {
	case bucket:
		return evaluateBucket(l, s, cost, now)
	case window:
		return evaluateWindow(l, rollWindow(l, s, now), cost, now)
	default:
		return evaluateConcurrency(l, s, cost)
	}
}

func evaluateBucket(l *Limit, s state, cost, now int64) outcome {
	interval := int64(l.interval)
	tolerance := l.capacity * interval
	tat := max(s.a, now)
	next := tat + cost*interval
	o := outcome{never: cost > l.capacity}
	if earliest := next - tolerance; earliest > now {
		o.wait = earliest - now
		o.remaining = l.units(max(tolerance-(tat-now), 0))
		o.reset = tat - now
		return o
	}
	o.ok = true
	o.remaining = l.units(tolerance - (next - now))
	o.reset = next - now
	o.next = state{a: next}
	return o
}

// rollWindow starts a new window when now has passed the stored one's end.
func rollWindow(l *Limit, s state, now int64) state {
	if now < s.a {
		return s
	}
	_, end := l.calendar.Bounds(time.Unix(0, now))
	return state{a: end.UnixNano()}
}

func evaluateWindow(l *Limit, s state, cost, now int64) outcome {
	o := outcome{never: cost > l.capacity, reset: s.a - now}
	if s.b+cost > l.capacity {
		o.wait = s.a - now
		o.remaining = max(l.capacity-s.b, 0)
		return o
	}
	o.ok = true
	o.remaining = l.capacity - s.b - cost
	o.next = state{a: s.a, b: s.b + cost}
	return o
}

func evaluateConcurrency(l *Limit, s state, cost int64) outcome {
	o := outcome{never: cost > l.capacity}
	if s.b+cost > l.capacity {
		o.remaining = max(l.capacity-s.b, 0)
		return o
	}
	o.ok = true
	o.remaining = l.capacity - s.b - cost
	o.next = state{b: s.b + cost}
	return o
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

// record adds check i's outcome to the decision.
func (d *Decision) record(i int, o outcome) {
	d.Remaining[i] = o.remaining
	d.Reset[i] = time.Duration(o.reset)
	if o.ok {
		return
	}
	if d.Allowed {
		d.Allowed, d.Refused = false, i
	}
	d.RetryAfter = max(d.RetryAfter, time.Duration(o.wait))
	d.Never = d.Never || o.never
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
