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
// clock; concurrent decisions share their round trips and script runs. Keys expire when idle. Redis
// is safe for concurrent use.
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
	r := &Redis{pipeline: &pipeline{client: client}}
	for _, opt := range opts {
		opt(r)
	}
	return r
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
func (r *Redis) Settle(ctx context.Context, checks []Check, now time.Time) error {
	if len(checks) == 0 {
		return nil
	}
	_, err := r.run(ctx, "settle", checks, now)
	return err
}

func (r *Redis) run(ctx context.Context, mode string, checks []Check, now time.Time) ([]int64, error) {
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
	reply, err := r.pipeline.run(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: run the decision script on %d keys: %w", len(checks), err)
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
