package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis keys, under one hash tag so that a transaction never spans two Redis Cluster slots:
//
//	{sluice-jobs}:stream               the stream of jobs to take: one entry per job, field "id"
//	{sluice-jobs}:job:<id>             the job, as JSON in field "job"; expires resultTTL after it ends
//	{sluice-jobs}:tenant:<t>:<state>   a tenant's jobs in a state, scored by their last change (ms)
//
// The consumer group "gateways" reads the stream. A job's entry is acknowledged and deleted when
// it ends; until then it stays pending with the replica that took it, which renews it while it
// still holds it (XCLAIM JUSTID, which resets its idle time and not its delivery count). An entry
// idle for the reclaim time (its replica died or stalled, or its attempt failed and waits to be
// tried again) is taken over by another replica with XAUTOCLAIM. The finished indexes are
// trimmed of what has expired whenever a job joins them. Redis must keep every key
// (maxmemory-policy noeviction): an evicted stream or job is a lost job.
const (
	keyPrefix = "{sluice-jobs}:"
	stream    = keyPrefix + "stream"
	group     = "gateways"
)

// takeBlock is how long one read of the stream waits for a new job.
const takeBlock = time.Second

// Redis keeps jobs in Redis, shared by every gateway replica. It is safe for concurrent use.
type Redis struct {
	client   redis.UniversalClient
	consumer string
	opts     Options
	grouped  atomic.Bool // the consumer group exists

	mu     sync.Mutex
	held   map[string]string // job id -> stream entry, for the jobs this replica runs
	cursor string            // where the next XAUTOCLAIM starts
}

// NewRedis returns a store in the Redis behind client. consumer names this replica in the
// consumer group; each replica needs its own.
func NewRedis(client redis.UniversalClient, consumer string, opts Options) *Redis {
	opts.defaults()
	return &Redis{client: client, consumer: consumer, opts: opts, held: map[string]string{}, cursor: "0-0"}
}

func jobKey(id string) string                { return keyPrefix + "job:" + id }
func indexKey(tenant string, s State) string { return keyPrefix + "tenant:" + tenant + ":" + string(s) }

// ensureGroup creates the stream and its consumer group, once until they are found lost.
func (r *Redis) ensureGroup(ctx context.Context) error {
	if r.grouped.Load() {
		return nil
	}
	err := r.client.XGroupCreateMkStream(ctx, stream, group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("jobs: create the consumer group: %w", err)
	}
	r.grouped.Store(true)
	return nil
}

// noticeLostGroup makes the next Take create the stream and its group again when err says they
// are gone: the stream was deleted, or evicted by a Redis that is not run with
// maxmemory-policy noeviction.
func (r *Redis) noticeLostGroup(err error) {
	if err != nil && strings.Contains(err.Error(), "NOGROUP") {
		r.grouped.Store(false)
	}
}

// addScript stores a job, indexes it queued and appends it to the stream, unless its tenant has
// as many queued as it may: KEYS are the job, the tenant's queued index and the stream; ARGV the
// job's JSON, its score, its id and the most queued. It returns 0 when it refuses.
var addScript = redis.NewScript(`
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'job', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('XADD', KEYS[3], '*', 'id', ARGV[3])
return 1
`)

// Add stores a new job, queued, and appends it to the stream, unless its tenant has
// MaxQueuedPerTenant queued already.
func (r *Redis) Add(ctx context.Context, j *Job) error {
	now := r.opts.Now()
	j.State, j.Created, j.Updated = Queued, now, now
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("jobs: encode job %s: %w", j.ID, err)
	}
	keys := []string{jobKey(j.ID), indexKey(j.Tenant, Queued), stream}
	added, err := addScript.Run(ctx, r.client, keys, data, now.UnixMilli(), j.ID, r.opts.MaxQueuedPerTenant).Int()
	if err != nil {
		return fmt.Errorf("jobs: add job %s: %w", j.ID, err)
	}
	if added == 0 {
		return ErrTooManyQueued
	}
	return nil
}

// Get returns a job.
func (r *Redis) Get(ctx context.Context, id string) (*Job, error) {
	return read(ctx, r.client, id)
}

func read(ctx context.Context, c redis.Cmdable, id string) (*Job, error) {
	data, err := c.HGet(ctx, jobKey(id), "job").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: read job %s: %w", id, err)
	}
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("jobs: decode job %s: %w", id, err)
	}
	return &j, nil
}

// List returns a tenant's newest jobs in a state (any state if empty), newest first.
func (r *Redis) List(ctx context.Context, tenant string, state State) ([]*Job, error) {
	states := States
	if state != "" {
		states = []State{state}
	}
	var out []*Job
	for _, s := range states {
		jobs, err := r.list(ctx, tenant, s)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	sortNewestFirst(out)
	return out[:min(len(out), ListLimit)], nil
}

func (r *Redis) list(ctx context.Context, tenant string, s State) ([]*Job, error) {
	key := indexKey(tenant, s)
	if s.Final() { // forget what has expired
		expired := r.opts.Now().Add(-r.opts.ResultTTL).UnixMilli()
		if err := r.client.ZRemRangeByScore(ctx, key, "-inf", fmt.Sprint(expired)).Err(); err != nil {
			return nil, fmt.Errorf("jobs: trim %s: %w", key, err)
		}
	}
	ids, err := r.client.ZRevRange(ctx, key, 0, ListLimit-1).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: list %s: %w", key, err)
	}
	var out []*Job
	for _, id := range ids {
		j, err := r.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if j.State == s { // the index and the job change in one transaction; this is a guard
			out = append(out, j)
		}
	}
	return out, nil
}

// Cancel cancels a job that has not finished. A replica running it finds out when its attempt
// ends.
func (r *Redis) Cancel(ctx context.Context, id string) (*Job, error) {
	return r.update(ctx, id, func(j *Job) error { return j.apply(cancel, Attempt{}, Outcome{}, r.opts.MaxAttempts, r.opts.Now()) })
}

// Take waits for a job that may go: first one idle for the reclaim time (its replica died, or
// its failed attempt has waited enough), then a new one. It returns the job running, its attempt
// counted. A job that has had all its attempts is returned failed: the caller only counts it.
func (r *Redis) Take(ctx context.Context) (*Job, error) {
	if err := r.ensureGroup(ctx); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		entry, id, err := r.nextEntry(ctx)
		if err != nil {
			return nil, err
		}
		if entry == "" {
			continue
		}
		j, err := r.takeEntry(ctx, entry, id)
		if err != nil || j != nil {
			return j, err
		}
	}
	return nil, ctx.Err()
}

// nextEntry returns a stream entry this replica now holds, or none after takeBlock.
func (r *Redis) nextEntry(ctx context.Context) (entry, id string, err error) {
	r.mu.Lock()
	start := r.cursor
	r.mu.Unlock()
	claimed, next, err := r.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: stream, Group: group, Consumer: r.consumer, MinIdle: r.opts.ReclaimAfter, Start: start, Count: 1,
	}).Result()
	if err != nil {
		r.noticeLostGroup(err)
		return "", "", fmt.Errorf("jobs: reclaim idle jobs: %w", err)
	}
	r.mu.Lock()
	r.cursor = next
	r.mu.Unlock()
	if len(claimed) > 0 {
		return claimed[0].ID, fmt.Sprint(claimed[0].Values["id"]), nil
	}
	streams, err := r.client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: group, Consumer: r.consumer, Streams: []string{stream, ">"}, Count: 1, Block: takeBlock,
	}).Result()
	if errors.Is(err, redis.Nil) || (err != nil && ctx.Err() != nil) {
		return "", "", nil
	}
	if err != nil {
		r.noticeLostGroup(err)
		return "", "", fmt.Errorf("jobs: read the stream: %w", err)
	}
	msg := streams[0].Messages[0]
	return msg.ID, fmt.Sprint(msg.Values["id"]), nil
}

// takeEntry starts an attempt of the entry's job. An entry whose job has expired, or already
// ended, is dropped and nil returned.
func (r *Redis) takeEntry(ctx context.Context, entry, id string) (*Job, error) {
	j, err := r.update(ctx, id, func(j *Job) error { return j.apply(take, Attempt{}, Outcome{}, r.opts.MaxAttempts, r.opts.Now()) })
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrFinished):
		return nil, r.drop(ctx, entry)
	case err != nil:
		return nil, err
	case j.State.Final():
		return j, r.drop(ctx, entry) // out of attempts: failed
	}
	r.mu.Lock()
	r.held[id] = entry
	r.mu.Unlock()
	return j, nil
}

// drop acknowledges and deletes a stream entry: its job has ended.
func (r *Redis) drop(ctx context.Context, entry string) error {
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAck(ctx, stream, group, entry)
		pipe.XDel(ctx, stream, entry)
		return nil
	})
	if err != nil {
		return fmt.Errorf("jobs: acknowledge entry %s: %w", entry, err)
	}
	return nil
}

// renewScript resets the idle time of the entries this consumer still holds, and returns the
// others: another replica reclaimed them, or their job ended. KEYS is the stream; ARGV the
// group, the consumer and the entries.
var renewScript = redis.NewScript(`
local lost = {}
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if pending[1] and pending[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
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
	args := []any{group, r.consumer}
	for id, e := range r.held {
		jobOf[e] = id
		args = append(args, e)
	}
	r.mu.Unlock()
	if len(jobOf) == 0 {
		return nil, nil
	}
	lostEntries, err := renewScript.Run(ctx, r.client, []string{stream}, args...).StringSlice()
	if err != nil {
		r.noticeLostGroup(err)
		return nil, fmt.Errorf("jobs: renew %d jobs: %w", len(jobOf), err)
	}
	lost := make([]string, 0, len(lostEntries))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range lostEntries {
		id := jobOf[e]
		if r.held[id] == e {
			delete(r.held, id)
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// Leave takes this replica out of the consumer group when it holds no entry, so that the names
// of stopped replicas do not pile up. Call it once this replica takes and runs no more jobs: an
// entry it still holds (an attempt cut short) keeps it in the group until another replica
// reclaims the entry.
func (r *Redis) Leave(ctx context.Context) error {
	pending, err := r.client.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: stream, Group: group, Start: "-", End: "+", Count: 1, Consumer: r.consumer,
	}).Result()
	switch {
	case err != nil && strings.Contains(err.Error(), "NOGROUP"):
		return nil // no group to leave
	case err != nil:
		return fmt.Errorf("jobs: list the entries of consumer %s: %w", r.consumer, err)
	case len(pending) > 0:
		return nil
	}
	if err := r.client.XGroupDelConsumer(ctx, stream, group, r.consumer).Err(); err != nil {
		return fmt.Errorf("jobs: delete consumer %s: %w", r.consumer, err)
	}
	return nil
}

// Finish records how attempt a ended. The job's entry is acknowledged when the job ends; after
// a failure another attempt may fix, it stays pending and unrenewed, so that it is reclaimed, by
// any replica, after the reclaim time. An attempt the job no longer runs (another replica took
// it over) is ErrNotRunning, and the job's entry is left to that replica.
func (r *Redis) Finish(ctx context.Context, a Attempt, o Outcome) (*Job, error) {
	j, err := r.update(ctx, a.Job, func(j *Job) error { return j.apply(finish, a, o, r.opts.MaxAttempts, r.opts.Now()) })
	if errors.Is(err, ErrNotRunning) {
		return j, err // another attempt's, with its entry; Renew tells whether that is this replica's
	}
	r.mu.Lock()
	entry := r.held[a.Job]
	delete(r.held, a.Job) // unrenewed, it is reclaimed, even if its end could not be recorded
	r.mu.Unlock()
	if err != nil && !errors.Is(err, ErrFinished) && !errors.Is(err, ErrNotFound) {
		return j, err
	}
	if entry != "" && (err != nil || j.State.Final()) {
		if dropErr := r.drop(ctx, entry); dropErr != nil {
			return j, dropErr
		}
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
// tenant's state indexes and setting its expiry when it ends. A change that returns an error is
// not written; the job is returned as it was.
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
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err == nil {
			err = changeErr
		}
		return out, err
	}
	return nil, fmt.Errorf("jobs: update job %s: changed by others %d times in a row", id, updateAttempts)
}

func (r *Redis) write(ctx context.Context, tx *redis.Tx, j *Job, before State) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("jobs: encode job %s: %w", j.ID, err)
	}
	_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSet(ctx, jobKey(j.ID), "job", data)
		if j.State != before {
			pipe.ZRem(ctx, indexKey(j.Tenant, before), j.ID)
			pipe.ZAdd(ctx, indexKey(j.Tenant, j.State), redis.Z{Score: float64(j.Updated.UnixMilli()), Member: j.ID})
		}
		if j.State.Final() {
			pipe.Expire(ctx, jobKey(j.ID), r.opts.ResultTTL)
		}
		if j.State.Final() && j.State != before { // the index forgets what has expired
			expired := r.opts.Now().Add(-r.opts.ResultTTL).UnixMilli()
			pipe.ZRemRangeByScore(ctx, indexKey(j.Tenant, j.State), "-inf", fmt.Sprint(expired))
		}
		return nil
	})
	return err
}
