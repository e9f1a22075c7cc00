package jobs

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory keeps jobs in this process: they do not survive a restart. Its zero value is not usable;
// call NewMemory. It is safe for concurrent use.
type Memory struct {
	opts Options
	wake chan struct{}

	mu      sync.Mutex
	jobs    map[string]*Job
	fresh   []string       // jobs never taken, oldest first
	retries []due          // jobs whose attempt failed, by the time they may go again
	ended   []due          // final jobs, by the time they expire
	queued  map[string]int // how many jobs each tenant has queued
}

type due struct {
	id string
	at time.Time
}

// NewMemory returns an empty store.
func NewMemory(opts Options) *Memory {
	opts.defaults()
	return &Memory{opts: opts, wake: make(chan struct{}, 1), jobs: map[string]*Job{}, queued: map[string]int{}}
}

// Add queues a new job, unless its tenant has MaxQueuedPerTenant queued already. It forgets the
// jobs that have expired, so that memory holds no more final jobs than those of the last
// ResultTTL.
func (m *Memory) Add(_ context.Context, j *Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	m.forgetExpired(now)
	if m.queued[j.Tenant] >= m.opts.MaxQueuedPerTenant {
		return ErrTooManyQueued
	}
	j.State, j.Created, j.Updated = Queued, now, now
	m.jobs[j.ID] = clone(j)
	m.queued[j.Tenant]++
	m.fresh = append(m.fresh, j.ID)
	m.kick()
	return nil
}

// forgetExpired drops the final jobs whose time to be read has passed. The caller holds m.mu.
func (m *Memory) forgetExpired(now time.Time) {
	for len(m.ended) > 0 && now.After(m.ended[0].at) {
		m.live(m.ended[0].id) // forgets it
		m.ended = m.ended[1:]
	}
}

// changed accounts for a job that went from state before to its own: its tenant's count of
// queued jobs and, once it ends, when it expires. The caller holds m.mu.
func (m *Memory) changed(before State, j *Job) {
	if before == j.State {
		return
	}
	if before == Queued {
		if m.queued[j.Tenant]--; m.queued[j.Tenant] <= 0 {
			delete(m.queued, j.Tenant)
		}
	}
	if j.State == Queued {
		m.queued[j.Tenant]++
	}
	if j.State.Final() {
		m.ended = append(m.ended, due{id: j.ID, at: j.Updated.Add(m.opts.ResultTTL)})
	}
}

func (m *Memory) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Get returns a copy of a job.
func (m *Memory) Get(_ context.Context, id string) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.live(id)
	if j == nil {
		return nil, ErrNotFound
	}
	return clone(j), nil
}

// live returns a job that has not expired, forgetting it if it has. The caller holds m.mu.
func (m *Memory) live(id string) *Job {
	j := m.jobs[id]
	if j != nil && j.State.Final() && m.opts.Now().Sub(j.Updated) > m.opts.ResultTTL {
		delete(m.jobs, id)
		return nil
	}
	return j
}

// List returns a tenant's newest jobs in a state (any state if empty), newest first.
func (m *Memory) List(_ context.Context, tenant string, state State) ([]*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Job
	for id, j := range m.jobs {
		if j.Tenant == tenant && (state == "" || j.State == state) && m.live(id) != nil {
			out = append(out, clone(j))
		}
	}
	sortNewestFirst(out)
	return out[:min(len(out), ListLimit)], nil
}

func sortNewestFirst(jobs []*Job) {
	slices.SortFunc(jobs, func(a, b *Job) int { return b.Created.Compare(a.Created) })
}

// Cancel cancels a job that has not finished.
func (m *Memory) Cancel(_ context.Context, id string) (*Job, error) {
	return m.update(id, func(j *Job) error { return j.apply(cancel, Attempt{}, Outcome{}, m.opts.MaxAttempts, m.opts.Now()) })
}

// Take waits for a job that may go, and returns it running, its attempt counted. A job that has
// had all its attempts is returned failed: the caller only counts it.
func (m *Memory) Take(ctx context.Context) (*Job, error) {
	for {
		m.mu.Lock()
		j, wait := m.next()
		m.mu.Unlock()
		if j != nil {
			return j, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-m.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// next takes the first job that may go, or says how long until one may. The caller holds m.mu.
func (m *Memory) next() (*Job, time.Duration) {
	now := m.opts.Now()
	for {
		var id string
		switch {
		case len(m.retries) > 0 && !m.retries[0].at.After(now):
			id, m.retries = m.retries[0].id, m.retries[1:]
		case len(m.fresh) > 0:
			id, m.fresh = m.fresh[0], m.fresh[1:]
		case len(m.retries) > 0:
			return nil, m.retries[0].at.Sub(now)
		default:
			return nil, time.Hour
		}
		j := m.live(id)
		if j == nil {
			continue // expired
		}
		before := j.State
		if j.apply(take, Attempt{}, Outcome{}, m.opts.MaxAttempts, now) != nil {
			continue // cancelled while it waited
		}
		m.changed(before, j)
		return clone(j), 0
	}
}

// Renew keeps this replica's jobs from being reclaimed. In memory nobody else could take them,
// so none is lost.
func (m *Memory) Renew(context.Context) ([]string, error) { return nil, nil }

// Leave does nothing: in memory there is no consumer group to leave.
func (m *Memory) Leave(context.Context) error { return nil }

// Finish records how a running job's attempt ended. A failure another attempt may fix queues the
// job again after the reclaim time, unless it was the last attempt.
func (m *Memory) Finish(_ context.Context, a Attempt, o Outcome) (*Job, error) {
	j, err := m.update(a.Job, func(j *Job) error { return j.apply(finish, a, o, m.opts.MaxAttempts, m.opts.Now()) })
	if err == nil && j.State == Queued {
		m.mu.Lock()
		m.retries = append(m.retries, due{id: a.Job, at: j.Updated.Add(m.opts.ReclaimAfter)})
		m.mu.Unlock()
		m.kick()
	}
	return j, err
}

// Hold records the estimate attempt a took from the limits; zero says nothing is held.
func (m *Memory) Hold(_ context.Context, a Attempt, held Cost) error {
	_, err := m.update(a.Job, func(j *Job) error { return j.hold(a, held) })
	return err
}

// Charge marks the job's cost settled and, for its latest attempt, gives back nothing held. It
// reports whether this was the first time: a later delivery of the same job must not be charged.
func (m *Memory) Charge(_ context.Context, a Attempt) (bool, error) {
	first := false
	_, err := m.update(a.Job, func(j *Job) error { first = j.charge(a); return nil })
	return first, err
}

func (m *Memory) update(id string, change func(*Job) error) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.live(id)
	if j == nil {
		return nil, ErrNotFound
	}
	next := clone(j)
	if err := change(next); err != nil {
		return clone(j), err
	}
	m.changed(j.State, next)
	m.jobs[id] = next
	return clone(next), nil
}

func clone(j *Job) *Job {
	c := *j
	return &c
}
