package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis keys, under one hash tag: taking a job picks the tenant whose turn it is inside one
// script, which must reach every tenant's queue, so they all live in one Redis Cluster slot.
//
//	{sluice-jobs}:job:<id>                  the job: its JSON in field "job", its request in "body"
//	                                        until it ends, its answer in "result"; it expires
//	                                        resultTTL after it ends
//	{sluice-jobs}:stream:<tenant>           a tenant's stream of jobs to take: one entry, field
//	                                        "id", per job that may go or is running
//	{sluice-jobs}:later:<tenant>            a tenant's jobs that may go at a time (after a failed
//	                                        or deferred attempt), scored by that time (ms)
//	{sluice-jobs}:turns                     the tenants with jobs in either, scored by their last
//	                                        turn: the lowest is looked at first
//	{sluice-jobs}:turn                      the count of turns given
//	{sluice-jobs}:bytes:<tenant>            the bytes each of a tenant's jobs holds, by id, and
//	                                        their sum in field "total"
//	{sluice-jobs}:tenant:<tenant>:<state>   a tenant's jobs in a state, scored by their last change
//	{sluice-jobs}:user:<tenant>:<state>:<user>  the same, for the jobs one user sent
//	{sluice-jobs}:epoch                     the store's epoch (see epoch.go), without expiry
//
// <tenant> is the tenant's id. The consumer group "gateways" reads each stream. A job's entry is
// acknowledged and deleted when the job ends or waits for a time; until then it stays pending
// with the replica that took it, which renews it while it still holds it (XCLAIM JUSTID, which
// resets its idle time). An entry idle for the reclaim time (its replica died or stalled) is
// taken over by another replica. The finished indexes, and the bytes their jobs hold, are
// trimmed of what has expired whenever a job is added or joins them. Redis must keep every key
// (maxmemory-policy noeviction): an evicted stream or job is a lost job.
const (
	keyPrefix = "{sluice-jobs}:"
	turnsKey  = keyPrefix + "turns"
	turnKey   = keyPrefix + "turn"
	epochKey  = keyPrefix + "epoch"
	group     = "gateways"
)

// takePoll is how long Take waits for a job after it found none, unless a job is added on this
// replica meanwhile. takeTenants bounds the tenants one take looks at: the next take goes on
// from where it stopped.
const (
	takePoll    = 250 * time.Millisecond
	takeTenants = 64
)

// Redis keeps jobs in Redis, shared by every gateway replica. It is safe for concurrent use.
type Redis struct {
	client   redis.UniversalClient
	consumer string
	opts     Options
	wake     chan struct{}

	// epoch is the store's epoch as this replica last read it, which Add names jobs under; nil
	// until the first Add or miss reads it.
	epoch atomic.Pointer[string]

	mu   sync.Mutex
	held map[string]entry // by job id, the entries of the jobs this replica runs
}

// entry is a job's entry in its tenant's stream.
type entry struct{ stream, id string }

// NewRedis returns a store in the Redis behind client. consumer names this replica in the
// consumer groups; each replica needs its own.
func NewRedis(client redis.UniversalClient, consumer string, opts Options) *Redis {
	opts.defaults()
	return &Redis{client: client, consumer: consumer, opts: opts, wake: make(chan struct{}, 1), held: map[string]entry{}}
}

func jobKey(id string) string          { return keyPrefix + "job:" + id }
func streamKey(tenant string) string   { return keyPrefix + "stream:" + tenant }
func laterKey(tenant string) string    { return keyPrefix + "later:" + tenant }
func bytesKey(tenant string) string    { return keyPrefix + "bytes:" + tenant }
func finishedKey(tenant string) string { return keyPrefix + "finished:" + tenant }
func finalStates() []State             { return []State{Succeeded, Failed, Cancelled} }
func tenantOwner(j *Job) Owner         { return Owner{TenantID: j.TenantID} }
func (r *Redis) expiredBefore() int64  { return r.opts.Now().Add(-r.opts.ResultTTL).UnixMilli() }

// indexKey is the key of an owner's jobs in a state. A tenant id holds no ':' (the gateway's
// configuration says so), so a user's key cannot be another tenant's.
func indexKey(o Owner, s State) string {
	if o.User == "" {
		return keyPrefix + "tenant:" + o.TenantID + ":" + string(s)
	}
	return keyPrefix + "user:" + o.TenantID + ":" + string(s) + ":" + o.User
}

// trimLua forgets a tenant's finished jobs that have expired, and the bytes they held: KEYS[i]
// for i in first..first+2 are its finished indexes, bytes its bytes, before the score they
// expire at.
const trimLua = `
local function trim(first, bytes, before)
  for i = first, first + 2 do
    local gone = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', before)
    for _, id in ipairs(gone) do
      local size = tonumber(redis.call('HGET', bytes, id) or '0')
      if size > 0 then redis.call('HINCRBY', bytes, 'total', -size) end
      redis.call('HDEL', bytes, id)
    end
    if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', before) end
  end
end
`

// addScript stores a job, indexes it queued and appends it to its tenant's stream, unless its id
// is not of the store's epoch, or the tenant has as many queued as it may, or its jobs would
// hold too many bytes. A store without an epoch takes a new one first. KEYS: the job, the
// tenant's and the user's queued indexes, the tenant's bytes, its stream, the turns, the turn
// count, the tenant's three finished indexes, the epoch. ARGV: the job's JSON, its body, its
// score, its id, the most queued, its size, the most bytes, the expiry score, the group, the
// tenant, the id's epoch, a new epoch. It returns the store's epoch when it is not the id's, or
// 0, or 1 for too many queued, 2 for too many bytes.
var addScript = redis.NewScript(trimLua + `
redis.call('SET', KEYS[11], ARGV[12], 'NX')
local epoch = redis.call('GET', KEYS[11])
if epoch ~= ARGV[11] then return epoch end
trim(8, KEYS[4], ARGV[8])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 1 end
local total = tonumber(redis.call('HGET', KEYS[4], 'total') or '0')
if total + tonumber(ARGV[6]) > tonumber(ARGV[7]) then return 2 end
redis.call('HSET', KEYS[1], 'job', ARGV[1], 'body', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('HINCRBY', KEYS[4], 'total', ARGV[6])
redis.call('HSET', KEYS[4], ARGV[4], ARGV[6])
redis.pcall('XGROUP', 'CREATE', KEYS[5], ARGV[9], '0', 'MKSTREAM')
redis.call('XADD', KEYS[5], '*', 'id', ARGV[4])
redis.call('ZADD', KEYS[6], 'NX', redis.call('GET', KEYS[7]) or 0, ARGV[10])
return 0
`)

// Add gives j an id and stores it, queued, and appends it to its tenant's stream, unless its
// tenant has MaxQueuedPerTenant queued already or its jobs would hold more than
// MaxBytesPerTenant.
//
// The id is of the epoch this replica last read. The script that adds the job checks it against
// the store's, in the same step: when the store has come back empty since (or this replica has
// not read its epoch yet), the script answers the store's epoch, or makes one, and the job is
// given an id of it and added again. Jobs added after a loss so carry the new epoch, at no cost
// to an Add in the common case.
func (r *Redis) Add(ctx context.Context, j *Job) error {
	now := r.opts.Now()
	j.State, j.Created, j.Updated, j.Size = Queued, now, now, int64(len(j.Body))
	fresh := newEpoch() // the store's, should it have none
	epoch := fresh
	if known := r.epoch.Load(); known != nil {
		epoch = *known
	}
	for range 2 { // a second epoch in between would be a second loss
		j.ID = newID(epoch)
		current, err := r.add(ctx, j, epoch, fresh)
		if err != nil || current == epoch {
			return err
		}
		r.epoch.Store(&current)
		epoch = current
	}
	return fmt.Errorf("jobs: add job %s: the store's epoch changed while it was added", j.ID)
}

// add runs addScript for j, whose id is of epoch. It returns the store's epoch, which is not
// epoch when j was not added for it, or an error.
func (r *Redis) add(ctx context.Context, j *Job, epoch, fresh string) (string, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return "", fmt.Errorf("jobs: encode job %s: %w", j.ID, err)
	}
	t := tenantOwner(j)
	keys := []string{jobKey(j.ID), indexKey(t, Queued), indexKey(j.owner(), Queued), bytesKey(j.TenantID), streamKey(j.TenantID), turnsKey, turnKey}
	for _, s := range finalStates() {
		keys = append(keys, indexKey(t, s))
	}
	keys = append(keys, epochKey)
	res, err := addScript.Run(ctx, r.client, keys, data, j.Body, j.Created.UnixMilli(), j.ID, r.opts.MaxQueuedPerTenant,
		j.Size, r.opts.MaxBytesPerTenant, r.expiredBefore(), group, j.TenantID, epoch, fresh).Result()
	if err != nil {
		return "", fmt.Errorf("jobs: add job %s: %w", j.ID, err)
	}
	switch res {
	case int64(0):
		r.wakeUp()
		return epoch, nil
	case int64(1):
		return epoch, ErrTooManyQueued
	case int64(2):
		return epoch, ErrTooManyBytes
	}
	current, ok := res.(string) // the store's epoch, another than the id's: nothing was added
	if !ok {
		return "", fmt.Errorf("jobs: add job %s: the script answered %v", j.ID, res)
	}
	return current, nil
}

// wakeUp tells this replica's Take that a job was added.
func (r *Redis) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Get returns a job, with its result. A job the store does not hold is ErrLost when its id is
// of another epoch than the store's, ErrNotFound otherwise.
func (r *Redis) Get(ctx context.Context, id string) (*Job, error) {
	j, err := read(ctx, r.client, id, "result")
	if errors.Is(err, ErrNotFound) {
		return nil, r.missing(ctx, id)
	}
	return j, err
}

// missing says why the store does not hold the job id names: ErrLost or ErrNotFound (see
// epoch.go). It reads the store's epoch anew, which may have changed since this replica last
// read it; a store with none has lost every job whose id carries one.
func (r *Redis) missing(ctx context.Context, id string) error {
	if _, ok := epochOf(id); !ok {
		return ErrNotFound
	}
	current, err := r.client.Get(ctx, epochKey).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return ErrLost
	case err != nil:
		return fmt.Errorf("jobs: read the store's epoch: %w", err)
	}
	r.epoch.Store(&current)
	return missing(id, current)
}

// NewEpoch gives the store a new epoch, for a store that came back from a snapshot older than
// some of its jobs (the limiter found it behind its durable record; see epoch.go): the jobs the
// snapshot holds are found as before, and those added after it, whose ids carry the epoch the
// snapshot brought back, read as lost rather than not found. Jobs added from now carry the new
// epoch.
func (r *Redis) NewEpoch(ctx context.Context) error {
	epoch := newEpoch()
	if err := r.client.Set(ctx, epochKey, epoch, 0).Err(); err != nil {
		return fmt.Errorf("jobs: set a new epoch: %w", err)
	}
	r.epoch.Store(&epoch)
	return nil
}

// read reads a job, and the named fields of its key besides its JSON: "body", "result".
func read(ctx context.Context, c redis.Cmdable, id string, with ...string) (*Job, error) {
	fields, err := c.HMGet(ctx, jobKey(id), append([]string{"job"}, with...)...).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: read job %s: %w", id, err)
	}
	data, ok := fields[0].(string)
	if !ok {
		return nil, ErrNotFound
	}
	var j Job
	if err := json.Unmarshal([]byte(data), &j); err != nil {
		return nil, fmt.Errorf("jobs: decode job %s: %w", id, err)
	}
	for i, name := range with {
		value, _ := fields[i+1].(string)
		switch {
		case value == "":
		case name == "body":
			j.Body = []byte(value)
		case name == "result":
			j.Result = []byte(value)
		}
	}
	return &j, nil
}

// List returns the owner's newest jobs in a state (any state if empty), newest first, at most
// ListLimit, without their results.
func (r *Redis) List(ctx context.Context, o Owner, state State) ([]*Job, error) {
	states := States
	if state != "" {
		states = []State{state}
	}
	var out []*Job
	for _, s := range states {
		jobs, err := r.list(ctx, o, s)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	sortNewestFirst(out)
	return out[:min(len(out), ListLimit)], nil
}

func (r *Redis) list(ctx context.Context, o Owner, s State) ([]*Job, error) {
	key := indexKey(o, s)
	if s.Final() { // forget what has expired
		if err := r.client.ZRemRangeByScore(ctx, key, "-inf", fmt.Sprint(r.expiredBefore())).Err(); err != nil {
			return nil, fmt.Errorf("jobs: trim %s: %w", key, err)
		}
	}
	ids, err := r.client.ZRevRange(ctx, key, 0, ListLimit-1).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: list %s: %w", key, err)
	}
	var out []*Job
	for _, id := range ids {
		j, err := read(ctx, r.client, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if j.State == s && j.Batch == "" { // the index and the job change in one transaction; this is a guard
			out = append(out, j)
		}
	}
	return out, nil
}

// Cancel cancels a job that has not finished. A replica running it finds out when its attempt
// ends; a stream entry of a job that waits is dropped by the replica that takes it.
func (r *Redis) Cancel(ctx context.Context, id string) (*Job, error) {
	return r.update(ctx, id, func(j *Job) error { return j.apply(cancel, Attempt{}, Outcome{}, r.opts.MaxAttempts, r.opts.Now()) })
}

// takeScript takes a job's stream entry for a consumer from the tenants whose turn it is, one
// tenant after another, each moved to the back of the turns as it is looked at: first an entry
// whose holder stopped renewing it, then a new one, after moving the tenant's jobs whose time has
// come onto its stream. A tenant with no job left loses its turn. KEYS: the turns and the turn
// count. ARGV: the group, the consumer, now (ms), the reclaim time (ms), the most tenants to look
// at, the key prefix. It returns the tenant, the entry and the job's id, or nil.
var takeScript = redis.NewScript(`
local group, consumer, prefix = ARGV[1], ARGV[2], ARGV[6]
for _, t in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[5]) - 1)) do
  redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), t)
  local stream, later = prefix .. 'stream:' .. t, prefix .. 'later:' .. t
  local due = redis.call('ZRANGEBYSCORE', later, '-inf', ARGV[3])
  for _, id in ipairs(due) do redis.call('XADD', stream, '*', 'id', id) end
  if #due > 0 then redis.call('ZREMRANGEBYSCORE', later, '-inf', ARGV[3]) end
  if redis.call('EXISTS', stream) == 1 then
    redis.pcall('XGROUP', 'CREATE', stream, group, '0')
    local idle = redis.call('XPENDING', stream, group, 'IDLE', ARGV[4], '-', '+', 1)
    if idle[1] then
      local claimed = redis.call('XCLAIM', stream, group, consumer, ARGV[4], idle[1][1])
      if claimed[1] then return {t, claimed[1][1], claimed[1][2][2]} end
    end
    local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, '>')
    if read then return {t, read[1][2][1][1], read[1][2][1][2][2]} end
  end
  if redis.call('XLEN', stream) == 0 and redis.call('ZCARD', later) == 0 then
    redis.call('DEL', stream)
    redis.call('ZREM', KEYS[1], t)
  end
end
return nil
`)

// Take waits for a job that may go, from the tenant whose turn it is: one whose holder died, or
// a new one, or one whose time to go again has come. It returns the job running, with its body,
// its attempt counted. A job that has had all its attempts is returned failed: the caller only
// counts it.
func (r *Redis) Take(ctx context.Context) (*Job, error) {
	for ctx.Err() == nil {
		e, id, err := r.nextEntry(ctx)
		if err != nil {
			return nil, err
		}
		if e.id == "" {
			r.sleep(ctx)
			continue
		}
		j, err := r.takeEntry(ctx, e, id)
		if err != nil || j != nil {
			return j, err
		}
	}
	return nil, ctx.Err()
}

// sleep waits takePoll, or less when a job is added on this replica.
func (r *Redis) sleep(ctx context.Context) {
	t := time.NewTimer(takePoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-r.wake:
	case <-t.C:
	}
}

// nextEntry returns a stream entry this replica now holds, and its job's id, or none.
func (r *Redis) nextEntry(ctx context.Context) (entry, string, error) {
	res, err := takeScript.Run(ctx, r.client, []string{turnsKey, turnKey}, group, r.consumer,
		r.opts.Now().UnixMilli(), r.opts.ReclaimAfter.Milliseconds(), takeTenants, keyPrefix).StringSlice()
	switch {
	case errors.Is(err, redis.Nil) || (err != nil && ctx.Err() != nil):
		return entry{}, "", nil
	case err != nil:
		return entry{}, "", fmt.Errorf("jobs: take a job: %w", err)
	}
	return entry{stream: streamKey(res[0]), id: res[1]}, res[2], nil
}

// takeEntry starts an attempt of the entry's job. An entry whose job has expired, or already
// ended, is dropped and nil returned.
func (r *Redis) takeEntry(ctx context.Context, e entry, id string) (*Job, error) {
	j, err := r.update(ctx, id, func(j *Job) error { return j.apply(take, Attempt{}, Outcome{}, r.opts.MaxAttempts, r.opts.Now()) })
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrFinished):
		return nil, r.drop(ctx, e)
	case err != nil:
		return nil, err
	case j.State.Final():
		return j, r.drop(ctx, e) // out of attempts: failed
	}
	body, err := r.client.HGet(ctx, jobKey(id), "body").Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("jobs: read the body of job %s: %w", id, err)
	}
	j.Body = body
	r.mu.Lock()
	r.held[id] = e
	r.mu.Unlock()
	return j, nil
}

// drop acknowledges and deletes a stream entry: its job has ended.
func (r *Redis) drop(ctx context.Context, e entry) error {
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAck(ctx, e.stream, group, e.id)
		pipe.XDel(ctx, e.stream, e.id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("jobs: acknowledge entry %s: %w", e.id, err)
	}
	return nil
}

// laterScript acknowledges and deletes a job's stream entry and keeps the job for a time. KEYS:
// the tenant's stream, its jobs for later, the turns. ARGV: the group, the entry, the job's id,
// the time (ms), the tenant.
var laterScript = redis.NewScript(`
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('ZADD', KEYS[3], 'NX', 0, ARGV[5])
return 1
`)

// later keeps a job to be taken again at a time, in place of its stream entry.
func (r *Redis) later(ctx context.Context, e entry, j *Job, at time.Time) error {
	keys := []string{e.stream, laterKey(j.TenantID), turnsKey}
	if err := laterScript.Run(ctx, r.client, keys, group, e.id, j.ID, at.UnixMilli(), j.TenantID).Err(); err != nil {
		return fmt.Errorf("jobs: queue job %s again: %w", j.ID, err)
	}
	return nil
}

// renewScript resets the idle time of the entries this consumer still holds, and returns the
// others: another replica reclaimed them, their job ended, or their stream is gone. KEYS are the
// entries' streams; ARGV the group, the consumer and the entries, one per stream.
var renewScript = redis.NewScript(`
local lost = {}
for i = 1, #KEYS do
  local e = ARGV[i + 2]
  local pending = redis.pcall('XPENDING', KEYS[i], ARGV[1], e, e, 1)
  if type(pending) == 'table' and pending[1] and pending[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[i], ARGV[1], ARGV[2], 0, e, 'JUSTID')
  else
    lost[#lost + 1] = e
  end
end
return lost
`)

// Renew resets the idle time of every job this replica runs, so no other replica reclaims them.
// Call it more often than the reclaim time. It renews only the entries this replica still holds:
// it returns the ids of the jobs another replica has reclaimed (this one stalled for longer than
// the reclaim time), which are no longer this replica's to run or finish.
func (r *Redis) Renew(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	jobOf := make(map[string]string, len(r.held))
	var streams []string
	args := []any{group, r.consumer}
	for id, e := range r.held {
		jobOf[e.id] = id
		streams = append(streams, e.stream)
		args = append(args, e.id)
	}
	r.mu.Unlock()
	if len(jobOf) == 0 {
		return nil, nil
	}
	lostEntries, err := renewScript.Run(ctx, r.client, streams, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("jobs: renew %d jobs: %w", len(jobOf), err)
	}
	lost := make([]string, 0, len(lostEntries))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range lostEntries {
		id := jobOf[e]
		if r.held[id].id == e {
			delete(r.held, id)
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// leaveScript deletes a consumer from the group of every tenant's stream where it holds no
// entry. KEYS: the turns. ARGV: the group, the consumer, the key prefix.
var leaveScript = redis.NewScript(`
for _, t in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local stream = ARGV[3] .. 'stream:' .. t
  local pending = redis.pcall('XPENDING', stream, ARGV[1], '-', '+', 1, ARGV[2])
  if type(pending) == 'table' and not pending[1] then
    redis.call('XGROUP', 'DELCONSUMER', stream, ARGV[1], ARGV[2])
  end
end
return 1
`)

// Leave takes this replica out of the consumer groups where it holds no entry, so that the names
// of stopped replicas do not pile up. Call it once this replica takes and runs no more jobs: an
// entry it still holds (an attempt cut short) keeps it in its group until another replica
// reclaims the entry. A tenant's stream is deleted, with its group, once it has no job left.
func (r *Redis) Leave(ctx context.Context) error {
	if err := leaveScript.Run(ctx, r.client, []string{turnsKey}, group, r.consumer, keyPrefix).Err(); err != nil {
		return fmt.Errorf("jobs: delete consumer %s: %w", r.consumer, err)
	}
	return nil
}

// Finish records how attempt a ended. The job's entry is acknowledged when the job ends, or
// when it is queued again: it waits, out of the stream, until the reclaim time has passed (or the
// outcome's NotBefore), and is then taken by any replica. An attempt the job no longer runs
// (another replica took it over) is ErrNotRunning, and the job's entry is left to that replica.
func (r *Redis) Finish(ctx context.Context, a Attempt, o Outcome) (*Job, error) {
	j, err := r.update(ctx, a.Job, func(j *Job) error { return j.apply(finish, a, o, r.opts.MaxAttempts, r.opts.Now()) })
	if errors.Is(err, ErrNotRunning) {
		return j, err // another attempt's, with its entry; Renew tells whether that is this replica's
	}
	r.mu.Lock()
	e, held := r.held[a.Job]
	delete(r.held, a.Job) // unrenewed, it is reclaimed, even if its end could not be recorded
	r.mu.Unlock()
	switch {
	case err != nil && !errors.Is(err, ErrFinished) && !errors.Is(err, ErrNotFound):
		return j, err
	case !held:
		return j, err
	case err == nil && j.State == Queued:
		return j, r.later(ctx, e, j, retryAt(j, o, r.opts.ReclaimAfter))
	}
	if dropErr := r.drop(ctx, e); dropErr != nil {
		return j, dropErr
	}
	return j, err
}

// Hold records the estimate attempt a took from the limits; zero says nothing is held.
func (r *Redis) Hold(ctx context.Context, a Attempt, held Cost) error {
	_, err := r.update(ctx, a.Job, func(j *Job) error { return j.hold(a, held) })
	return err
}

// Charge marks the job's cost settled and, for its latest attempt, clears what it held, in one
// transaction. It reports whether this was the first time: a later delivery of the same job must
// not be charged.
func (r *Redis) Charge(ctx context.Context, a Attempt) (bool, error) {
	first := false
	_, err := r.update(ctx, a.Job, func(j *Job) error { first = j.charge(a); return nil })
	return first, err
}

// updateAttempts bounds the optimistic transaction's retries when other replicas change the same
// job at once.
const updateAttempts = 10

// update changes a job in an optimistic transaction (WATCH, MULTI, EXEC), moving it between its
// owners' state indexes and, when it ends, dropping its body, keeping its result, counting its
// bytes anew and setting its expiry. A change that returns an error is not written; the job is
// returned as it was. The job is read and returned without its body and result. A job the
// store does not hold is ErrLost or ErrNotFound, as for Get.
func (r *Redis) update(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	key := jobKey(id)
	for range updateAttempts {
		var out *Job
		var changeErr error
		err := r.client.Watch(ctx, func(tx *redis.Tx) error {
			j, err := read(ctx, tx, id)
			if err != nil {
				return err
			}
			before := j.State
			if changeErr = change(j); changeErr != nil {
				out = j
				return nil
			}
			out = j
			return r.write(ctx, tx, j, before)
		}, key)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case errors.Is(err, ErrNotFound):
			return nil, r.missing(ctx, id)
		case err == nil:
			err = changeErr
		}
		return out, err
	}
	return nil, fmt.Errorf("jobs: update job %s: changed by others %d times in a row", id, updateAttempts)
}

func (r *Redis) write(ctx context.Context, tx *redis.Tx, j *Job, before State) error {
	ended := j.State.Final() && !before.Final()
	var grown int64
	if ended {
		grown = j.settleSize()
	}
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("jobs: encode job %s: %w", j.ID, err)
	}
	_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		key := jobKey(j.ID)
		pipe.HSet(ctx, key, "job", data)
		if j.State != before {
			r.reindex(ctx, pipe, j, before)
		}
		if ended {
			pipe.HDel(ctx, key, "body")
			pipe.HIncrBy(ctx, bytesKey(j.TenantID), "total", grown)
			if j.keptWhenEnded() {
				if len(j.Result) > 0 {
					pipe.HSet(ctx, key, "result", j.Result)
				}
				pipe.HSet(ctx, bytesKey(j.TenantID), j.ID, j.Size)
				r.finish(ctx, pipe, j)
			} else {
				pipe.HDel(ctx, bytesKey(j.TenantID), j.ID)
			}
		}
		if j.State.Final() {
			pipe.Expire(ctx, key, r.opts.ResultTTL)
		}
		return nil
	})
	return err
}

// finishScript counts a job that ended among its tenant's finished jobs, in the order they
// ended, and forgets the oldest past the most the tenant keeps: each job, its place in its
// owners' indexes and the bytes it held. Finished jobs that expired meanwhile count until then;
// there are never more than the most kept. KEYS: the tenant's finished jobs, their count and its
// bytes. ARGV: the job's id, the most kept, the key prefix, the tenant. It returns how many it
// forgot.
var finishScript = redis.NewScript(`
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if over <= 0 then return 0 end
local prefix, tenant = ARGV[3], ARGV[4]
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, over - 1)) do
  local data = redis.call('HGET', prefix .. 'job:' .. id, 'job')
  if data then
    local j = cjson.decode(data)
    redis.call('ZREM', prefix .. 'tenant:' .. tenant .. ':' .. j.state, id)
    if type(j.user) == 'string' and j.user ~= '' then
      redis.call('ZREM', prefix .. 'user:' .. tenant .. ':' .. j.state .. ':' .. j.user, id)
    end
    redis.call('DEL', prefix .. 'job:' .. id)
  end
  local size = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  if size > 0 then redis.call('HINCRBY', KEYS[3], 'total', -size) end
  redis.call('HDEL', KEYS[3], id)
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
return over
`)

// finish counts a job that ended among its tenant's finished jobs, in the transaction of pipe,
// forgetting the oldest past MaxFinishedPerTenant. The script goes as its source: a transaction
// cannot load it on a miss.
func (r *Redis) finish(ctx context.Context, pipe redis.Pipeliner, j *Job) {
	keys := []string{finishedKey(j.TenantID), finishedKey(j.TenantID) + ":count", bytesKey(j.TenantID)}
	finishScript.Eval(ctx, pipe, keys, j.ID, r.opts.MaxFinishedPerTenant, keyPrefix, j.TenantID)
}

// reindex moves a job from its owners' indexes of state before to those of its state. The
// finished index it joins forgets what has expired; the tenant's bytes are trimmed by Add. A
// batch's line that ended joins none.
func (r *Redis) reindex(ctx context.Context, pipe redis.Pipeliner, j *Job, before State) {
	for _, o := range []Owner{tenantOwner(j), j.owner()} {
		pipe.ZRem(ctx, indexKey(o, before), j.ID)
		if j.State.Final() && !j.keptWhenEnded() {
			continue
		}
		pipe.ZAdd(ctx, indexKey(o, j.State), redis.Z{Score: float64(j.Updated.UnixMilli()), Member: j.ID})
		if j.State.Final() && o.User != "" {
			pipe.ZRemRangeByScore(ctx, indexKey(o, j.State), "-inf", fmt.Sprint(r.expiredBefore()))
		}
	}
}
