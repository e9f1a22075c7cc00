package ratelimit

import "time"

// state is one key's state, in nanoseconds since the Unix epoch where it holds a time.
//   - bucket: a is the theoretical arrival time (the bucket is full at a or before), b the one
//     a request within a pace's burst waits for (see evaluateBucket), and a plain bucket's a;
//   - window: a is the end of the window, b what was used in it;
//   - rolling: a is the newest slot that counts (its start over the slot's length), b what it
//     counts; the counts of the slots before it are in a slotRing kept beside the state (in a
//     Memory store's cell, or read with it from Redis), which the core functions take as older;
//   - concurrency: b is the count in flight.
//
// Only a rolling window needs more than two numbers. Its ring is kept beside the state rather
// than in it, so that every kind's state stays two numbers, copied in registers and stored in a
// decision's arrays as cheaply as before rolling windows came.
type state struct{ a, b int64 }

// slotRing holds a rolling window's counts of the slots before its newest: slots+1 entries, slot
// j's at j modulo that length, each tagged with its slot so that an entry left by a slot that has
// since left the window counts nothing, and nothing needs clearing.
//
// An entry is written when a decision moves the window on to a newer slot, even when that
// decision is then refused and its state not stored: the entry written is the count of the slot
// the stored state still holds as its newest (which a decision reads from the state, not the
// ring), and it replaces only a slot that no window from then on counts, so no decision can
// tell. This lets a decision on a rolling window, like one on the other kinds, return the state
// to store without copying the ring.
type slotRing struct {
	entries []slotCount
	// sum caches what the entries of slots from up to, not including, to count, until an entry
	// changes (once a slot at most): a decision in the same slot as the one before it finds what
	// the window counts without going through every entry.
	from, to, sum int64
	summed        bool
}

type slotCount struct{ slot, count int64 }

func newSlotRing(l *Limit) *slotRing {
	return &slotRing{entries: make([]slotCount, l.slots+1)}
}

// count returns what slot j counts in the ring: nothing when its entry holds another slot.
func (r *slotRing) count(j int64) int64 {
	if e := r.entries[j%int64(len(r.entries))]; e.slot == j {
		return e.count
	}
	return 0
}

func (r *slotRing) put(j, count int64) {
	r.entries[j%int64(len(r.entries))] = slotCount{slot: j, count: count}
	r.summed = false
}

// countBetween returns what the slots from up to, not including, to count in the ring.
func (r *slotRing) countBetween(from, to int64) int64 {
	if r.summed && r.from == from && r.to == to {
		return r.sum
	}
	var sum int64
	for _, e := range r.entries {
		if e.slot >= from && e.slot < to {
			sum += e.count
		}
	}
	r.from, r.to, r.sum, r.summed = from, to, sum, true
	return sum
}

// evaluate checks cost on l, in state s (and older, a rolling window's ring), at now (ns): the
// pure core, but for the ring's entries a rolling window may write (see slotRing). It records
// the result as check i of d and returns the state to store if the whole decision allows, and
// whether this check passed. (Writing into d, rather than returning a result struct, keeps the hot path in
// registers.)
func (d *Decision) evaluate(i int, l *Limit, s state, older *slotRing, cost, now int64) (state, bool) {
	d.Remaining[i], d.Reset[i] = 0, 0
	if l.kind == mark {
		return s, d.evaluateMark(i, s, cost)
	}
	if cost > l.largest {
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
	case rolling:
		return d.evaluateRolling(i, l, s, older, cost, now)
	default:
		return d.evaluateConcurrency(i, l, s, cost)
	}
}

// evaluateBucket checks cost on a bucket, whose arrival time is s.a. A pace (see NewPace) keeps
// a second arrival time, s.b, which never passes empty: a request past its burst waits for s.a,
// the bucket full, and leaves it in debt; a request within its burst waits for s.b alone, so that
// a lone request past the burst holds back no other request while the rolling minute beside the
// pace has room for it. Every request moves both on, so that requests past the burst go no faster
// than the pace between them.
func (d *Decision) evaluateBucket(i int, l *Limit, s state, cost, now int64) (state, bool) {
	interval := int64(l.interval)
	tolerance := l.capacity * interval
	tat := max(s.a, now)
	own := l.withinBurst(s, tat, now) // the arrival time a request within the burst waits for
	earliest := own + cost*interval - tolerance
	if cost > l.capacity {
		earliest = tat // a pace lets a request past its burst when it is full
	}
	if earliest > now {
		d.Remaining[i] = l.units(max(tolerance-(own-now), 0))
		d.Reset[i] = time.Duration(tat - now)
		d.refuse(i, earliest-now, false)
		return s, false
	}
	next := state{a: tat + cost*interval}
	next.b = l.leftEmpty(next.a, own+cost*interval, now)
	d.Remaining[i] = l.units(max(tolerance-(next.b-now), 0))
	d.Reset[i] = time.Duration(next.a - now)
	return next, true
}

// withinBurst returns the arrival time a request within a bucket's burst waits for at now, tat
// being the bucket's own (s.a, or now if earlier): a pace's s.b, a plain bucket's tat.
func (l *Limit) withinBurst(s state, tat, now int64) int64 {
	if l.largest > l.capacity {
		return max(s.b, now)
	}
	return tat
}

// leftEmpty returns the arrival time that requests within a bucket's burst wait for after a
// change that moved it to b and the bucket's own to a: for a pace, b, but never past empty at
// now; for a plain bucket, a.
func (l *Limit) leftEmpty(a, b, now int64) int64 {
	if l.largest > l.capacity {
		return min(b, now+l.capacity*int64(l.interval))
	}
	return a
}

// evaluateMark passes when the mark in s holds at least version: a mark's state is its version in
// a, and 1 in b once it is set.
func (d *Decision) evaluateMark(i int, s state, version int64) bool {
	if s.b == 0 || s.a < version {
		d.refuse(i, 0, false)
		return false
	}
	return true
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

// evaluateRolling counts every slot that overlaps the period before now, the oldest in full
// although part of it is past: what it allows is then never more than the capacity in any span
// of the period, since every unit taken in such a span lies in a slot the span's last decision
// counted.
func (d *Decision) evaluateRolling(i int, l *Limit, s state, older *slotRing, cost, now int64) (state, bool) {
	slot := l.chargedSlot(s, now)
	used := l.counted(s, older, slot)
	if used+cost > l.capacity {
		d.Remaining[i] = max(l.capacity-used, 0)
		d.Reset[i] = time.Duration(l.rollingReset(s, older, now))
		d.refuse(i, l.rollingWait(s, older, slot, used+cost-l.capacity, now), false)
		return s, false
	}
	next := moveTo(s, older, slot)
	next.b = max(next.b+cost, 0)
	d.Remaining[i] = l.capacity - used - cost
	if next.b > 0 { // the newest slot holds something: the window is whole once it is past
		d.Reset[i] = time.Duration(l.slotEnd(slot) - now)
	} else {
		d.Reset[i] = time.Duration(l.rollingReset(next, older, now))
	}
	return next, true
}

// chargedSlot is the slot a rolling window takes from at now: now's, or the newest that counts
// when the clock stepped back, since it leaves the window last.
func (l *Limit) chargedSlot(s state, now int64) int64 {
	return max(s.a, l.units(now))
}

// counted returns what a rolling window in s counts for a decision in slot: every slot from
// slot-slots (its oldest, partly past) to the newest.
func (l *Limit) counted(s state, older *slotRing, slot int64) int64 {
	oldest := slot - l.slots
	if s.a < oldest {
		return 0
	}
	if older == nil {
		return s.b
	}
	return s.b + older.countBetween(oldest, s.a)
}

// countOf returns what slot j counts in a rolling window.
func countOf(s state, older *slotRing, j int64) int64 {
	switch {
	case j == s.a:
		return s.b
	case j > s.a || older == nil:
		return 0
	default:
		return older.count(j)
	}
}

// moveTo returns s with slot as its newest: the newest so far goes into the ring (see slotRing),
// even when it counts nothing, as it replaces what an earlier move, not stored, wrote there
// before a settlement changed it.
func moveTo(s state, older *slotRing, slot int64) state {
	if slot == s.a {
		return s
	}
	if older != nil {
		older.put(s.a, s.b)
	}
	return state{a: slot}
}

// slotEnd returns when slot j leaves a rolling window: the first instant no decision counts it.
func (l *Limit) slotEnd(j int64) int64 {
	return (j + l.slots + 1) * int64(l.interval)
}

// rollingWait returns how long a decision refused in slot must wait for excess units to leave:
// until the oldest slots that hold them are past.
func (l *Limit) rollingWait(s state, older *slotRing, slot, excess, now int64) int64 {
	for j := slot - l.slots; j < s.a; j++ {
		if excess -= countOf(s, older, j); excess <= 0 {
			return l.slotEnd(j) - now
		}
	}
	return l.slotEnd(s.a) - now // the cost fits once every slot is past
}

// rollingReset returns how long until a rolling window counts nothing: until its newest slot that
// holds anything is past.
func (l *Limit) rollingReset(s state, older *slotRing, now int64) int64 {
	oldest := l.chargedSlot(s, now) - l.slots
	for j := s.a; j >= oldest; j-- {
		if countOf(s, older, j) > 0 {
			return l.slotEnd(j) - now
		}
	}
	return 0
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

// begin starts d as a decision taken at now that allows, until a check refuses.
func (d *Decision) begin(now time.Time) {
	d.Allowed, d.Refused, d.RetryAfter, d.Never, d.At = true, -1, 0, false, now
}

// fail makes d a decision that was not taken: it neither allows nor names a check that refused.
func (d *Decision) fail() {
	d.begin(time.Time{})
	d.Allowed = false
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

// reading is what l holds in state s at now (ns): what a decision of cost zero reports, and how
// long one of cost would wait.
func reading(l *Limit, s state, older *slotRing, cost, now int64) Reading {
	var d Decision
	d.evaluate(0, l, s, older, 0, now)
	r := Reading{Remaining: d.Remaining[0], Reset: d.Reset[0]}
	if cost > 0 {
		d.begin(time.Unix(0, now))
		d.evaluate(0, l, s, older, cost, now)
		r.Wait = d.RetryAfter
	}
	return r
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
// went, and what it really cost is owed. Nothing goes below empty. took is when the decision
// settled was taken (ns; 0 if unknown), which only a rolling window reads (see settleRolling).
func settle(l *Limit, s state, older *slotRing, delta, now, took int64) state {
	// No real call is worth more than a few bursts; a larger delta is a bug or a lie, and would
	// overflow the arithmetic below.
	delta = min(max(delta, -4*l.largest), 4*l.largest)
	switch l.kind {
	case bucket:
		step := delta * int64(l.interval)
		a := max(max(s.a, now)+step, now)
		return state{a: a, b: l.leftEmpty(a, max(l.withinBurst(s, a, now)+step, now), now)}
	case window:
		s = rollWindow(l, s, now)
		return state{a: s.a, b: max(s.b+delta, 0)}
	case rolling:
		return l.settleRolling(s, older, delta, now, took)
	case mark:
		return s // a mark is set by re-seeding alone
	default:
		return state{b: max(s.b+delta, 0)}
	}
}

// settleRolling adds delta to the slot the settled decision took from, as the provider counts a
// call's real use when it admitted it: a refund then frees what the estimate held where it held
// it, even while no other call is let go. Once that slot has left the window, so has what the
// call took, and nothing is left to settle. A settlement whose decision is unknown (took 0)
// counts in the current slot. No slot goes below zero nor above four capacities. older is the
// ring of a bound cell, never nil.
func (l *Limit) settleRolling(s state, older *slotRing, delta, now, took int64) state {
	current := l.chargedSlot(s, now)
	slot := current
	if took != 0 {
		slot = min(l.units(took), s.a)
	}
	switch {
	case slot < current-l.slots:
		return s // past the window
	case slot >= s.a:
		s = moveTo(s, older, slot)
		s.b = l.slotHolding(s.b + delta)
	default:
		older.put(slot, l.slotHolding(older.count(slot)+delta))
	}
	return s
}

// slotHolding is what a rolling window's slot may hold of n: nothing below zero, no more than four
// capacities.
func (l *Limit) slotHolding(n int64) int64 { return min(max(n, 0), 4*l.capacity) }

// idle reports whether s is what a key with no state means, so the key can be dropped.
func idle(l *Limit, s state, older *slotRing, now int64) bool {
	switch l.kind {
	case bucket:
		return s.a <= now
	case window:
		return s.a <= now || s.b == 0
	case rolling:
		return l.rollingReset(s, older, now) == 0
	case mark:
		return false // without its mark, a scope's windows would be seeded again
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
