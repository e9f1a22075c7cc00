package kept

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// minSweep is the fewest owners Memory holds before it looks for expired ones to drop.
const minSweep = 1024

// Memory keeps owners and follows in this process, for a gateway without Redis: they do not
// survive a restart. Its zero value is not usable; call NewMemory. It is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	owners map[string]owned
	// sweepAt is how many owners Own lets the map hold before it drops the expired: twice what
	// it held after the last sweep, so that it holds at most about twice the owners not expired,
	// at a constant cost per id on average.
	sweepAt int
	follows map[string]Follow
}

// owned is an id's owner and when it expires.
type owned struct {
	owner   Owner
	expires time.Time
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{owners: map[string]owned{}, sweepAt: minSweep, follows: map[string]Follow{}}
}

// Own records ids as o's for ttl; an id already recorded is overwritten and its ttl renewed.
func (m *Memory) Own(_ context.Context, o Owner, ttl time.Duration, ids ...string) error {
	if err := checkOwn(o, ttl, ids); err != nil {
		return err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.owners[id] = owned{owner: o, expires: now.Add(ttl)}
	}
	if len(m.owners) >= m.sweepAt {
		m.sweep(now)
	}
	return nil
}

// sweep drops the owners expired at now. The caller holds m.mu.
func (m *Memory) sweep(now time.Time) {
	maps.DeleteFunc(m.owners, func(_ string, w owned) bool { return !now.Before(w.expires) })
	m.sweepAt = max(2*len(m.owners), minSweep)
}

// Owners returns each id's owner, nil for one not recorded or expired, in the order of ids.
func (m *Memory) Owners(_ context.Context, ids ...string) ([]*Owner, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Owner, len(ids))
	for i, id := range ids {
		w, ok := m.owners[id]
		if !ok {
			continue
		}
		if !now.Before(w.expires) {
			delete(m.owners, id)
			continue
		}
		out[i] = &w.owner
	}
	return out, nil
}

// Forget removes ids' owners.
func (m *Memory) Forget(_ context.Context, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.owners, id)
	}
	return nil
}

// Follow records f (f.Holder holds it until f.HeldUntil). Recording an id followed already
// replaces it.
func (m *Memory) Follow(_ context.Context, f Follow) error {
	if err := checkFollow(f); err != nil {
		return err
	}
	f.HeldUntil = toMillisecond(f.HeldUntil)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.follows[f.ID] = f
	return nil
}

// Followed returns the follow of id, or nil.
func (m *Memory) Followed(_ context.Context, id string) (*Follow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.follows[id]
	if !ok {
		return nil, nil
	}
	return &f, nil
}

// Hold extends to until the hold of those of ids that holder still holds, and returns the ids it
// no longer holds (claimed by another, or finished). A hold is never shortened.
func (m *Memory) Hold(_ context.Context, holder string, until time.Time, ids ...string) ([]string, error) {
	if err := checkHolder(holder); err != nil {
		return nil, err
	}
	until = toMillisecond(until)
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []string
	for _, id := range ids {
		f, ok := m.follows[id]
		if !ok || f.Holder != holder {
			lost = append(lost, id)
			continue
		}
		if f.HeldUntil.Before(until) {
			f.HeldUntil = until
			m.follows[id] = f
		}
	}
	return lost, nil
}

// Claim takes for holder, until until, at most n follows whose hold lapsed before now, those
// that lapsed first first, and returns them (with Holder and HeldUntil as now recorded).
func (m *Memory) Claim(_ context.Context, holder string, now, until time.Time, n int) ([]Follow, error) {
	if err := checkHolder(holder); err != nil {
		return nil, err
	}
	now, until = toMillisecond(now), toMillisecond(until)
	m.mu.Lock()
	defer m.mu.Unlock()
	var lapsed []Follow
	for _, f := range m.follows {
		if f.HeldUntil.Before(now) {
			lapsed = append(lapsed, f)
		}
	}
	slices.SortFunc(lapsed, lapsedFirst)
	lapsed = lapsed[:min(len(lapsed), max(0, n))]
	for i := range lapsed {
		lapsed[i].Holder, lapsed[i].HeldUntil = holder, until
		m.follows[lapsed[i].ID] = lapsed[i]
	}
	return lapsed, nil
}

// lapsedFirst orders follows by when their hold lapsed, then by id, as Redis's sorted set does.
func lapsedFirst(a, b Follow) int {
	return cmp.Or(a.HeldUntil.Compare(b.HeldUntil), cmp.Compare(a.ID, b.ID))
}

// Finish removes the follow of id and reports whether this call removed it.
func (m *Memory) Finish(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.follows[id]
	delete(m.follows, id)
	return ok, nil
}
