package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Memory keeps limiter state in this process. It is the default store for one replica.
//
// Each key's state is a cell (about 100 bytes with its map entry: BenchmarkMemoryBytesPerKey; a
// rolling window's also holds its ring of slots, 16 bytes a slot, made when the cell is), found
// through a map only the first time a Limit is used; after that the Limit points at its cell, so
// a decision costs no lookup. Sweep drops the cells whose state has returned to what no state
// means (a full bucket, an ended window, a rolling window that counts nothing, nothing in
// flight), so nothing is lost by dropping them, and a Limit whose cell was dropped binds to a new
// one at its next use.
//
// The zero value is not usable; call NewMemory. Memory is safe for concurrent use. A Limit may be
// used with one Memory store at a time.
type Memory struct {
	mu    sync.Mutex
	cells map[string]*cell
}

// cell is one key's state in one Memory store.
type cell struct {
	owner   *Memory
	limit   *Limit // the Limit that last bound the cell, for Sweep
	dropped bool   // Sweep removed the cell from owner.cells
	state
	before state     // the state a decision in progress replaced, to put back if it refuses
	older  *slotRing // a rolling window's counts before its newest slot (see state)
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{cells: map[string]*cell{}}
}

// Decide checks every check at now and, when all pass, takes every cost; otherwise it takes
// nothing. It writes the outcome into d (see Decision). It does not allocate once each Limit has
// been used.
func (m *Memory) Decide(_ context.Context, checks []Check, now time.Time, d *Decision) error {
	if len(checks) > MaxChecks {
		d.fail()
		return errTooManyChecks(len(checks))
	}
	t := now.UnixNano()
	d.begin(now)
	var passed uint32
	m.mu.Lock()
	defer m.mu.Unlock()
	// Each check that passes takes at once, keeping the state it replaced: the keys of one
	// decision differ, so no check reads another's state, and a refusal puts back what was taken.
	for i, c := range checks {
		cl := m.bind(c.Limit)
		if s, ok := d.evaluate(i, c.Limit, cl.state, cl.older, c.Cost, t); ok {
			passed |= 1 << i
			cl.before, cl.state = cl.state, s
		}
	}
	if !d.Allowed {
		m.putBack(checks, passed)
		d.undo(checks, passed)
	}
	return nil
}

// putBack gives the checks that passed (bit i for check i) the state they had before a decision
// that refused. The caller holds m.mu.
func (m *Memory) putBack(checks []Check, passed uint32) {
	for i, c := range checks {
		if passed&(1<<i) != 0 {
			cl := m.bind(c.Limit)
			cl.state = cl.before
		}
	}
}

// Settle adds each check's Cost (negative to refund) to its limit, without checking it. It
// ignores id: a settlement in memory cannot fail half-way, so no caller has reason to send one
// again.
func (m *Memory) Settle(_ context.Context, id string, checks []Check, now time.Time) error {
	t := now.UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range checks {
		cl := m.bind(c.Limit)
		cl.state = settle(c.Limit, cl.state, cl.older, c.Cost, t, unixNano(c.Took))
	}
	return nil
}

// Peek reads what each check's limit holds at now, as a decision of cost zero would, and how
// long one of the check's cost would wait, and changes nothing.
func (m *Memory) Peek(_ context.Context, checks []Check, now time.Time) ([]Reading, error) {
	t := now.UnixNano()
	out := make([]Reading, len(checks))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, c := range checks {
		s, older := m.state(c.Limit)
		out[i] = reading(c.Limit, s, older, c.Cost, t)
	}
	return out, nil
}

// state returns l's state in m, and a rolling window's ring, without binding a cell: a key never
// used has the zero state. The caller holds m.mu.
func (m *Memory) state(l *Limit) (state, *slotRing) {
	if cl := l.cell.Load(); cl != nil && cl.owner == m && !cl.dropped {
		return cl.state, cl.older
	}
	if cl := m.cells[l.Key]; cl != nil {
		return cl.state, cl.older
	}
	return state{}, nil
}

// Renew does nothing: in memory a slot in flight is held until it is released, without expiry,
// since a process that dies takes its slots with it.
func (m *Memory) Renew(context.Context, []Check, time.Time) error { return nil }

// Sweep drops the keys that are idle at now. Call it every minute or so.
func (m *Memory) Sweep(now time.Time) {
	t := now.UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, cl := range m.cells {
		if idle(cl.limit, cl.state, cl.older, t) {
			cl.dropped = true
			delete(m.cells, key)
		}
	}
}

// Len returns how many keys hold state.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cells)
}

// bind returns l's cell in m, creating it at l's first use. The caller holds m.mu.
func (m *Memory) bind(l *Limit) *cell {
	if cl := l.cell.Load(); cl != nil && cl.owner == m && !cl.dropped {
		return cl
	}
	cl := m.cells[l.Key]
	if cl == nil {
		cl = &cell{owner: m}
		m.cells[l.Key] = cl
	}
	// A new Limit for a known key (a configuration reload) keeps the key's state.
	cl.limit = l
	if l.kind == rolling && (cl.older == nil || len(cl.older.entries) != int(l.slots)+1) {
		// Bound once, so that no decision allocates. (Slots of another length start afresh.)
		cl.state, cl.older = state{}, newSlotRing(l)
	}
	l.cell.Store(cl)
	return cl
}
