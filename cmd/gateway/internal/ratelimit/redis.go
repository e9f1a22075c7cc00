package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed decide.lua
var decideSource string

var decideScript = redis.NewScript(decideSource)

// Redis keeps limiter state in Redis, so that every gateway replica draws from the same budgets.
// Each decision is evaluated and taken atomically in a script, in one round trip, on Redis's own
// clock; concurrent decisions share their round trips and script runs. Keys expire when idle. A
// caller waits for its answer at most half a second (or until its context ends) and then gets an
// error; whatever its run took is given back once Redis answers (see pipeline). Build the client
// with ClientOptions. Redis is safe for concurrent use.
type Redis struct {
	pipeline     *pipeline
	trustCallers bool
}

// RedisOption configures a Redis store.
type RedisOption func(*Redis)

// WithCallerClock makes the store use the now passed to Decide and Settle instead of Redis's own
// clock. It exists so tests can drive the Redis store on fake time; production never uses it.
func WithCallerClock() RedisOption { return func(r *Redis) { r.trustCallers = true } }

// NewRedis returns a store that keeps its state in the Redis behind client.
func NewRedis(client redis.UniversalClient, opts ...RedisOption) *Redis {
	r := &Redis{pipeline: newPipeline(client)}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// ClientOptions returns o with the timeouts and retries the limiter needs from its Redis client,
// whatever its form (one server, Sentinel or Cluster): a read or write timeout of half a second,
// so that a stalled Redis fails over fast, and no retries. A command that timed out may still
// run, and a script run sent twice would take twice. A Cluster's redirections (MOVED, ASK) are
// still followed: the node that redirects has not run the script.
func ClientOptions(o redis.UniversalOptions) *redis.UniversalOptions {
	o.DialTimeout = time.Second
	o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	o.MaxRetries = -1
	return &o
}

// Decide checks every check and, when all pass, takes every cost; otherwise it takes nothing.
// now is used only for the ends of calendar windows, unless WithCallerClock was given.
func (r *Redis) Decide(ctx context.Context, checks []Check, now time.Time) (Decision, error) {
	if len(checks) > MaxChecks {
		return Decision{Refused: -1}, errTooManyChecks(len(checks))
	}
	if len(checks) == 0 { // nothing to ask Redis; the pipeline takes runs with keys only
		return Decision{Allowed: true, Refused: -1}, nil
	}
	reply, err := r.run(ctx, "decide", checks, now)
	if err != nil {
		return Decision{Refused: -1}, err
	}
	return parseReply(reply, len(checks))
}

// Settle adds each check's Cost (negative to refund) to its limit without checking it; a
// negative Cost on a concurrency limit releases the check's Lease.
//
// id names the settlement and must be unique to it (the call's lease name). A settlement whose id
// was applied before does nothing, for as long as the longest lease among its checks lives and at
// least settledFor, so a caller that does not know whether a settlement went through (it timed
// out) may send it again. The record of the id is a key with the hash tag of the checks' keys.
func (r *Redis) Settle(ctx context.Context, id string, checks []Check, now time.Time) error {
	if len(checks) == 0 {
		return nil
	}
	if id == "" {
		return errors.New("ratelimit: a settlement needs an id")
	}
	run, err := r.newRun("settle", checks, now)
	if err != nil {
		return err
	}
	run.mark, run.keep = settledKey(checks[0].Limit.Key, id), settledTTL(checks).Milliseconds()
	_, err = r.send(ctx, run)
	return err
}

// settledFor is the shortest time a settlement's id is remembered: longer than a caller goes on
// sending a settlement whose outcome it does not know.
const settledFor = time.Minute

// settledKey names the record that the settlement id was applied, in the hash tag of key.
func settledKey(key, id string) string {
	return "{" + hashTag(key) + "}:settled:" + id
}

// settledTTL is how long a settlement of checks is remembered: as long as its longest lease, and
// at least settledFor.
func settledTTL(checks []Check) time.Duration {
	ttl := settledFor
	for _, c := range checks {
		if c.Limit.kind == concurrency {
			ttl = max(ttl, c.Limit.leaseTTL)
		}
	}
	return ttl
}

// Renew keeps the leases of the concurrency checks among checks for another lease time to live
// from now, so that a call longer than its lease keeps its slot. A lease that has expired or was
// released is not taken again. Other checks are ignored.
func (r *Redis) Renew(ctx context.Context, checks []Check, now time.Time) error {
	var leases []Check
	for _, c := range checks {
		if c.Limit.kind == concurrency {
			leases = append(leases, c)
		}
	}
	if len(leases) == 0 {
		return nil
	}
	run, err := r.newRun("renew", leases, now)
	if err != nil {
		return err
	}
	_, err = r.send(ctx, run)
	return err
}

func (r *Redis) run(ctx context.Context, mode string, checks []Check, now time.Time) ([]int64, error) {
	run, err := r.newRun(mode, checks, now)
	if err != nil {
		return nil, err
	}
	return r.send(ctx, run)
}

// newRun returns the script run of checks in mode: "decide", "settle" or "renew".
func (r *Redis) newRun(mode string, checks []Check, now time.Time) (*scriptRun, error) {
	run := &scriptRun{mode: mode, keys: make([]string, len(checks)), args: make([]any, 0, 5*len(checks))}
	if r.trustCallers {
		run.clock = strconv.FormatInt(now.UnixMicro(), 10)
	}
	for i, c := range checks {
		run.keys[i] = c.Limit.Key
		var err error
		if run.args, err = appendScriptArgs(run.args, c, now); err != nil {
			return nil, err
		}
	}
	return run, nil
}

func (r *Redis) send(ctx context.Context, run *scriptRun) ([]int64, error) {
	reply, err := r.pipeline.run(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: run the decision script on %d keys: %w", len(run.keys), err)
	}
	return reply, nil
}

// scriptConstants are a limit's script arguments that never change: kind, capacity and, for a
// bucket or a concurrency limit, p1.
func scriptConstants(l *Limit) [3]any {
	switch l.kind {
	case bucket:
		return [3]any{"b", l.capacity, strconv.FormatFloat(float64(l.interval)/float64(time.Microsecond), 'f', -1, 64)}
	case window:
		return [3]any{"w", l.capacity, nil}
	default:
		return [3]any{"c", l.capacity, l.leaseTTL.Microseconds()}
	}
}

// appendScriptArgs appends a check's five script arguments: kind, capacity, p1, p2 and cost.
func appendScriptArgs(args []any, c Check, now time.Time) ([]any, error) {
	l := c.Limit
	switch l.kind {
	case bucket:
		return append(args, l.script[0], l.script[1], l.script[2], "", c.Cost), nil
	case window:
		_, end := l.calendar.Bounds(now)
		_, next := l.calendar.Bounds(end)
		return append(args, l.script[0], l.script[1], end.UnixMicro(), next.UnixMicro(), c.Cost), nil
	default:
		if c.Lease == "" {
			return nil, fmt.Errorf("ratelimit: concurrency check on %q has no lease", l.Key)
		}
		return append(args, l.script[0], l.script[1], l.script[2], c.Lease, c.Cost), nil
	}
}

func parseReply(reply []int64, n int) (Decision, error) {
	if len(reply) != 4+2*n {
		return Decision{Refused: -1}, errors.New("ratelimit: the decision script answered in an unknown form")
	}
	d := Decision{Allowed: reply[0] == 1, Refused: int(reply[1]), RetryAfter: time.Duration(reply[2]) * time.Microsecond, Never: reply[3] == 1}
	for i := range n {
		d.Remaining[i] = reply[4+2*i]
		d.Reset[i] = time.Duration(reply[5+2*i]) * time.Microsecond
	}
	return d, nil
}
