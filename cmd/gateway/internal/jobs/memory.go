package jobs

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory keeps jobs in this process: they do not survive a restart, and its epoch is the
// process's, so that a restarted gateway answers the jobs it lost as lost. Its zero value is not
// usable; call NewMemory. It is safe for concurrent use.
type Memory struct {
	opts  Options
	wake  chan struct{}
	epoch string

	mu     sync.Mutex
	jobs   map[string]*Job
	queues map[string]*queue          // by tenant id: the tenants with jobs to take
	turns  []string                   // the tenant ids in queues, the next to take from first
	ended  []due                      // final jobs, by the time they expire
	queued map[string]int             // how many jobs each tenant has queued
	bytes  map[string]int64           // how many bytes each tenant's jobs hold
	owned  map[string]map[string]bool // each tenant's jobs, by id
	// finished are each tenant's final jobs, oldest first, some perhaps forgotten already.
	finished map[string][]string
}

// queue is one tenant's jobs to take.
type queue struct {
	ready []string // jobs that may go, oldest first
	later []due    // jobs that may go at a time: after a failed or deferred attempt
}

type due struct {
	id string
	at time.Time
}

// NewMemory returns an empty store.
func NewMemory(opts Options) *Memory {
	opts.defaults()
	return &Memory{opts: opts, wake: make(chan struct{}, 1), epoch: newEpoch(), jobs: map[string]*Job{}, queues: map[string]*queue{},
		queued: map[string]int{}, bytes: map[string]int64{}, owned: map[string]map[string]bool{}, finished: map[string][]string{}}
}

// Add gives j an id and queues it, unless its tenant has MaxQueuedPerTenant queued already or
// its jobs would hold more than MaxBytesPerTenant. It forgets the jobs that have expired, so
// that memory holds no more final jobs than those of the last ResultTTL.
func (m *Memory) Add(_ context.Context, j *Job) error {
	j.ID = newID(m.epoch)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	m.forgetExpired(now)
	switch {
	case m.queued[j.TenantID] >= m.opts.MaxQueuedPerTenant:
		return ErrTooManyQueued
	case m.bytes[j.TenantID]+int64(len(j.Body)) > m.opts.MaxBytesPerTenant:
		return ErrTooManyBytes
	}
	j.State, j.Created, j.Updated, j.Size = Queued, now, now, int64(len(j.Body))
	m.jobs[j.ID] = clone(j)
	if m.owned[j.TenantID] == nil {
		m.owned[j.TenantID] = map[string]bool{}
	}
	m.owned[j.TenantID][j.ID] = true
	m.queued[j.TenantID]++
	m.bytes[j.TenantID] += j.Size
	m.queue(j.TenantID).ready = append(m.queue(j.TenantID).ready, j.ID)
	m.kick()
	return nil
}

// queue returns a tenant's queue, giving it a turn if it had none. The caller holds m.mu.
func (m *Memory) queue(tenant string) *queue {
	q := m.queues[tenant]
	if q == nil {
		q = &queue{}
		m.queues[tenant] = q
		m.turns = append(m.turns, tenant)
	}
	return q
}

// forgetExpired drops the final jobs whose time to be read has passed. The caller holds m.mu.
func (m *Memory) forgetExpired(now time.Time) {
	for len(m.ended) > 0 && now.After(m.ended[0].at) {
		m.live(m.ended[0].id) // forgets it
		m.ended = m.ended[1:]
	}
}

// changed accounts for a job that went from state before to its own: its tenant's count of
// queued jobs and, once it ends, its bytes and when it expires. The caller holds m.mu.
func (m *Memory) changed(before State, j *Job) {
	if before == j.State {
		return
	}
	if before == Queued {
		if m.queued[j.TenantID]--; m.queued[j.TenantID] <= 0 {
			delete(m.queued, j.TenantID)
		}
	}
	if j.State == Queued {
		m.queued[j.TenantID]++
	}
	if j.State.Final() {
		m.bytes[j.TenantID] += j.settleSize()
		m.ended = append(m.ended, due{id: j.ID, at: j.Updated.Add(m.opts.ResultTTL)})
		if j.keptWhenEnded() {
			m.finish(j)
		}
	}
}

// finish counts a job that ended among its tenant's finished ones, forgetting the oldest past
// MaxFinishedPerTenant. The caller holds m.mu.
func (m *Memory) finish(j *Job) {
	ids := append(m.finished[j.TenantID], j.ID)
	ids = slices.DeleteFunc(ids, func(id string) bool { return m.jobs[id] == nil }) // expired
	for len(ids) > m.opts.MaxFinishedPerTenant {
		m.forget(m.jobs[ids[0]])
		ids = ids[1:]
	}
	m.finished[j.TenantID] = ids
}

func (m *Memory) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Get returns a copy of a job, with its result. A job this process does not hold is ErrLost
// when its id is of another epoch (another process's), ErrNotFound otherwise.
func (m *Memory) Get(_ context.Context, id string) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.live(id)
	if j == nil {
		return nil, missing(id, m.epoch)
	}
	return clone(j), nil
}

// live returns a job that has not expired, forgetting it and its bytes if it has. The caller
// holds m.mu.
func (m *Memory) live(id string) *Job {
	j := m.jobs[id]
	if j != nil && j.State.Final() && m.opts.Now().Sub(j.Updated) > m.opts.ResultTTL {
		m.forget(j)
		return nil
	}
	return j
}

// forget drops a final job and the bytes it held. The caller holds m.mu.
func (m *Memory) forget(j *Job) {
	delete(m.jobs, j.ID)
	if m.bytes[j.TenantID] -= j.Size; m.bytes[j.TenantID] <= 0 {
		delete(m.bytes, j.TenantID)
	}
	if delete(m.owned[j.TenantID], j.ID); len(m.owned[j.TenantID]) == 0 {
		delete(m.owned, j.TenantID)
	}
}

// List returns the owner's newest jobs in a state (any state if empty), newest first, at most
// ListLimit, without their results; a batch's lines are not listed.
func (m *Memory) List(_ context.Context, o Owner, state State) ([]*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Job
	for id := range m.owned[o.TenantID] {
		if j := m.live(id); j != nil && j.Batch == "" && o.Owns(j) && (state == "" || j.State == state) {
			c := clone(j)
			c.Body, c.Result = nil, nil
			out = append(out, c)
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

// Take waits for a job that may go, from the tenant whose turn it is, and returns it running,
// with its body, its attempt counted. A job that has had all its attempts is returned failed:
// the caller only counts it.
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

// next takes the first job that may go, going round the tenants one job each, or says how long
// until one may. The caller holds m.mu.
func (m *Memory) next() (*Job, time.Duration) {
	now := m.opts.Now()
	wait := time.Hour
	for range len(m.turns) {
		tenant := m.turns[0]
		m.turns = append(m.turns[1:], tenant)
		if j := m.takeFrom(tenant, now); j != nil {
			return j, 0
		}
		if q := m.queues[tenant]; q != nil {
			wait = min(wait, q.later[0].at.Sub(now))
		}
	}
	return nil, wait
}

// takeFrom takes a tenant's next job that may go. A tenant left with nothing to take loses its
// turn; one whose jobs all wait for a time keeps it. The caller holds m.mu.
func (m *Memory) takeFrom(tenant string, now time.Time) *Job {
	q := m.queues[tenant]
	for len(q.later) > 0 && !q.later[0].at.After(now) {
		q.ready = append(q.ready, q.later[0].id)
		q.later = q.later[1:]
	}
	for len(q.ready) > 0 {
		id := q.ready[0]
		q.ready = q.ready[1:]
		if j := m.start(id, now); j != nil {
			return j
		}
	}
	if len(q.later) == 0 {
		delete(m.queues, tenant)
		m.turns = slices.DeleteFunc(m.turns, func(t string) bool { return t == tenant })
	}
	return nil
}

// start starts an attempt of a job, or returns nil when it expired or was cancelled while it
// waited. The caller holds m.mu.
func (m *Memory) start(id string, now time.Time) *Job {
	j := m.live(id)
	if j == nil {
		return nil
	}
	before := j.State
	if j.apply(take, Attempt{}, Outcome{}, m.opts.MaxAttempts, now) != nil {
		return nil
	}
	m.changed(before, j)
	return clone(j)
}

// Renew keeps this replica's jobs from being reclaimed. In memory nobody else could take them,
// so none is lost.
func (m *Memory) Renew(context.Context) ([]string, error) { return nil, nil }

// NewEpoch does nothing: in memory, jobs are lost only with their process, whose epoch is its
// own.
func (m *Memory) NewEpoch(context.Context) error { return nil }

// Leave does nothing: in memory there is no consumer group to leave.
func (m *Memory) Leave(context.Context) error { return nil }

// Finish records how a running job's attempt ended. A failure another attempt may fix queues the
// job again after the reclaim time, unless it was the last attempt; a deferred attempt queues it
// again at the outcome's NotBefore.
func (m *Memory) Finish(_ context.Context, a Attempt, o Outcome) (*Job, error) {
	j, err := m.update(a.Job, func(j *Job) error { return j.apply(finish, a, o, m.opts.MaxAttempts, m.opts.Now()) })
	if err == nil && j.State == Queued {
		m.mu.Lock()
		q := m.queue(j.TenantID)
		q.later = append(q.later, due{id: a.Job, at: retryAt(j, o, m.opts.ReclaimAfter)})
		slices.SortStableFunc(q.later, func(a, b due) int { return a.at.Compare(b.at) })
		m.mu.Unlock()
		m.kick()
	}
	return j, err
}

// retryAt is when a job that an attempt queued again may be taken: when the outcome says, or
// after the reclaim time.
func retryAt(j *Job, o Outcome, reclaimAfter time.Duration) time.Time {
	if !o.NotBefore.IsZero() {
		return o.NotBefore
	}
	return j.Updated.Add(reclaimAfter)
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
		return nil, missing(id, m.epoch)
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
