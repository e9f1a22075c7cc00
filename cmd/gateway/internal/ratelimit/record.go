package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A store that comes back empty, or from an older snapshot, would give back what its calendar
// windows (budgets, day and month quotas) used. So the windows of a scope (the keys of one hash
// tag) are trusted only beside the scope's mark: a key holding the version of the durable record
// that the store holds of the scope. A decision on a scope's windows carries a check on its mark
// (NewMark), with the version the gateway's record holds as its cost; a mark that is missing or
// older refuses the decision, and the gateway re-seeds the scope from its record (Reseed) before
// it decides again. The record is kept from the store's snapshots (Snapshot), each of which moves
// a scope that holds at least the record's version on to the next.

// NewMark returns the mark of a scope's windows, at key (in the scope's hash tag). A check on it
// passes when the mark holds at least the check's Cost: the version of the record the store
// must hold. It takes nothing, and a settlement leaves it as it is.
func NewMark(key string, level Level) *Limit {
	return newLimit(key, level, Version, mark, 0, func(l *Limit) { l.largest = math.MaxInt64 })
}

// Seed is what a calendar window used, as the record holds it: the window that ends at End.
type Seed struct {
	Limit *Limit
	End   time.Time
	Used  int64
}

// ScopeState is a scope as a snapshot read it.
type ScopeState struct {
	// Version is the scope's mark after the snapshot, or -1 when it has none.
	Version int64
	// Current is true when the mark held at least the version asked for; the snapshot then moved
	// it on by one.
	Current bool
	// At is when the store was read, by its clock.
	At time.Time
	// Windows hold, for each window asked for in turn, the end of its current window and what it
	// used; the zero Seed for a window that holds nothing now.
	Windows []Seed
}

// Reseed brings a scope's windows up to at least what seeds say, each in the window that ends at
// its End (one that has ended is skipped, and a window the store holds a later one of is left as
// it is), and sets the scope's mark to version, unless the mark already holds version or later.
// It is one atomic step on Redis, so that several gateways that find a scope behind re-seed it
// once. It reports whether it re-seeded.
func (m *Memory) Reseed(_ context.Context, mk *Limit, version int64, seeds []Seed, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc := m.bind(mk)
	if mc.b == 1 && mc.a >= version {
		return false, nil
	}
	t := now.UnixNano()
	for _, s := range seeds {
		end := s.End.UnixNano()
		if s.Limit.kind != window || end <= t {
			continue
		}
		c := m.bind(s.Limit)
		switch {
		case c.a == end:
			c.b = max(c.b, s.Used)
		case c.a < end:
			c.state = state{a: end, b: s.Used}
		}
	}
	mc.state = state{a: version, b: 1}
	return true, nil
}

// Snapshot reads a scope's windows and its mark, and moves the mark on by one when it holds at
// least version (see ScopeState).
func (m *Memory) Snapshot(_ context.Context, mk *Limit, version int64, windows []*Limit, now time.Time) (ScopeState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := ScopeState{Version: -1, At: now, Windows: make([]Seed, len(windows))}
	if mc := m.bind(mk); mc.b == 1 {
		out.Version = mc.a
		if mc.a >= version {
			mc.a++
			out.Version, out.Current = mc.a, true
		}
	}
	t := now.UnixNano()
	for i, l := range windows {
		if s, _ := m.state(l); l.kind == window && s.a > t && s.b > 0 {
			out.Windows[i] = Seed{Limit: l, End: time.Unix(0, s.a), Used: s.b}
		}
	}
	return out, nil
}

//go:embed reseed.lua
var reseedSource string

var reseedScript = redis.NewScript(reseedSource)

//go:embed snapshot.lua
var snapshotSource string

var snapshotScript = redis.NewScript(snapshotSource)

// Reseed is Memory.Reseed on Redis: one script run on the scope's slot.
func (r *Redis) Reseed(ctx context.Context, mk *Limit, version int64, seeds []Seed, now time.Time) (bool, error) {
	keys := make([]string, 1, len(seeds)+1)
	keys[0] = mk.Key
	args := make([]any, 2, 2*len(seeds)+2)
	args[0], args[1] = r.clockArg(now), version
	for _, s := range seeds {
		if s.Limit.kind == window {
			keys = append(keys, s.Limit.Key)
			args = append(args, s.End.UnixMicro(), s.Used)
		}
	}
	done, err := reseedScript.Run(ctx, r.pipeline.client, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: re-seed %q: %w", mk.Key, err)
	}
	return done == 1, nil
}

// Snapshot is Memory.Snapshot on Redis: one script run on the scope's slot.
func (r *Redis) Snapshot(ctx context.Context, mk *Limit, version int64, windows []*Limit, now time.Time) (ScopeState, error) {
	keys := make([]string, 1, len(windows)+1)
	keys[0] = mk.Key
	for _, l := range windows {
		keys = append(keys, l.Key)
	}
	reply, err := snapshotScript.Run(ctx, r.pipeline.client, keys, r.clockArg(now), version).Slice()
	if err != nil {
		return ScopeState{}, fmt.Errorf("ratelimit: read %q: %w", mk.Key, err)
	}
	return parseSnapshot(reply, windows)
}

// clockArg is the now a script takes: now in microseconds with WithCallerClock, else an empty
// string for Redis's own clock.
func (r *Redis) clockArg(now time.Time) string {
	if r.trustCallers {
		return strconv.FormatInt(now.UnixMicro(), 10)
	}
	return ""
}

// parseSnapshot reads the snapshot script's reply: the mark's version (-1 for none), 1 when it
// was current, now (microseconds), then each window's value, "end used" or "".
func parseSnapshot(reply []any, windows []*Limit) (ScopeState, error) {
	if len(reply) != 3+len(windows) {
		return ScopeState{}, errors.New("ratelimit: the snapshot script answered in an unknown form")
	}
	version, _ := reply[0].(int64)
	current, _ := reply[1].(int64)
	now, _ := reply[2].(int64)
	out := ScopeState{Version: version, Current: current == 1, At: time.UnixMicro(now), Windows: make([]Seed, len(windows))}
	for i, l := range windows {
		v, _ := reply[3+i].(string)
		end, used, err := parseWindowValue(v)
		if err != nil {
			return ScopeState{}, fmt.Errorf("ratelimit: read %q: %w", l.Key, err)
		}
		if l.kind == window && end > now && used > 0 {
			out.Windows[i] = Seed{Limit: l, End: time.UnixMicro(end), Used: used}
		}
	}
	return out, nil
}

// parseWindowValue parses a window's value, "end used" (end in microseconds); "" is an empty
// window.
func parseWindowValue(v string) (end, used int64, err error) {
	if v == "" {
		return 0, 0, nil
	}
	e, u, _ := strings.Cut(v, " ")
	end, err1 := strconv.ParseInt(e, 10, 64)
	used, err2 := strconv.ParseInt(u, 10, 64)
	return end, used, errors.Join(err1, err2)
}
