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
// Each decision is evaluated and taken in one round trip, on Redis's own clock; concurrent
// decisions share their round trips and script runs. Keys expire when idle. A caller waits for its
// answer at most half a second (or until its context ends) and then gets an error; whatever its
// run took is given back once Redis answers (see pipeline). Redis is safe for concurrent use.
//
// On one primary (a *redis.Client: standalone, or Sentinel's failover client) a decision is one
// script run, atomic over all its keys whatever their hash tags. On Redis Cluster (any other
// client) a script run touches one slot, so a decision whose keys carry several hash tags is
// taken in one script run per hash tag, all sent at once, and undone where it took when another
// part refused, before its caller hears: it takes from every level or from none, and since each
// part checks and takes atomically on its own slot, no level ever passes its capacity (see
// splitByHashTag). Build the client with ClientOptions, FailoverClientOptions or
// ClusterClientOptions.
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
// run, and a script run sent twice would take twice; the limiter's own script runs are never
// sent twice (see scriptCmd), and the other commands of the gateway's stores are written for a
// client without retries.
//
// A Cluster client still follows MOVED and ASK redirects (a redirected command did not run), up
// to MaxRedirects times, and sends a command again after a network error or a timeout within
// the same MaxRedirects, whatever MaxRetries says. Its read timeout cannot be lengthened for the
// limiter's script runs alone, as a *redis.Client's is (see newPipeline): on Redis Cluster, a run
// whose answer takes longer than this half second has an outcome nobody knows, and what it took
// stays taken, on the safe side.
func ClientOptions(o redis.UniversalOptions) *redis.UniversalOptions {
	o.DialTimeout = time.Second
	o.ReadTimeout, o.WriteTimeout = clientTimeout, clientTimeout
	o.MaxRetries = -1
	return &o
}

// clientTimeout is the read and write timeout of the clients the Options functions configure.
const clientTimeout = 500 * time.Millisecond

// Decide checks every check and, when all pass, takes every cost; otherwise it takes nothing.
// now is used only for the ends of calendar windows, unless WithCallerClock was given. It writes
// the outcome into d (see Decision).
func (r *Redis) Decide(ctx context.Context, checks []Check, now time.Time, d *Decision) error {
	if len(checks) > MaxChecks {
		d.fail()
		return errTooManyChecks(len(checks))
	}
	if len(checks) == 0 { // nothing to ask Redis; the pipeline takes runs with keys only
		d.begin(time.Time{})
		return nil
	}
	reply, err := r.run(ctx, "decide", checks, now)
	if err != nil {
		d.fail()
		return err
	}
	return parseReply(reply, len(checks), d)
}

// Settle adds each check's Cost (negative to refund) to its limit without checking it; a
// negative Cost on a concurrency limit releases the check's Lease.
//
// id names the settlement and must be unique to it (the call's lease name). A settlement whose id
// was applied before does nothing, for as long as the longest lease among its checks lives and at
// least settledFor, so a caller that does not know whether a settlement went through (it timed
// out) may send it again. The record of the id is a key with the hash tag of the first check's
// key; on Redis Cluster, a settlement over several hash tags keeps one record in each, so each
// slot's part applies once however often it is sent, even when another part failed.
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
	run.id, run.mark, run.keep = id, settledKey(checks[0].Limit.Key, id), settledTTL(checks).Milliseconds()
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
// bucket, a rolling window or a concurrency limit, p1; for a bucket, p2 too: the largest cost it
// lets pass when full, "" for its capacity.
func scriptConstants(l *Limit) [4]any {
	switch l.kind {
	case bucket:
		var largest any = ""
		if l.largest > l.capacity {
			largest = l.largest
		}
		return [4]any{"b", l.capacity, strconv.FormatFloat(float64(l.interval)/float64(time.Microsecond), 'f', -1, 64), largest}
	case window:
		return [4]any{"w", l.capacity, nil, nil}
	case rolling:
		return [4]any{"r", l.capacity, fmt.Sprint(l.interval.Microseconds(), " ", l.slots), nil}
	case mark:
		return [4]any{"m", 0, "", ""}
	default:
		return [4]any{"c", l.capacity, l.leaseTTL.Microseconds(), nil}
	}
}

// appendScriptArgs appends a check's five script arguments: kind, capacity, p1, p2 and cost.
func appendScriptArgs(args []any, c Check, now time.Time) ([]any, error) {
	l := c.Limit
	switch l.kind {
	case bucket:
		return append(args, l.script[0], l.script[1], l.script[2], l.script[3], c.Cost), nil
	case rolling:
		var took any = ""
		if !c.Took.IsZero() {
			took = c.Took.UnixMicro()
		}
		return append(args, l.script[0], l.script[1], l.script[2], took, c.Cost), nil
	case window:
		_, end := l.calendar.Bounds(now)
		_, next := l.calendar.Bounds(end)
		return append(args, l.script[0], l.script[1], end.UnixMicro(), next.UnixMicro(), c.Cost), nil
	case mark:
		return append(args, l.script[0], l.script[1], l.script[2], l.script[3], c.Cost), nil
	default:
		if c.Lease == "" {
			return nil, fmt.Errorf("ratelimit: concurrency check on %q has no lease", l.Key)
		}
		return append(args, l.script[0], l.script[1], l.script[2], c.Lease, c.Cost), nil
	}
}

// A decision's reply: allowed, refused, wait, never and now (see decide.lua), then remaining and
// reset per check.
const (
	replyHeader   = 5
	replyNow      = 4
	replyPerCheck = 2
)

func parseReply(reply []int64, n int, d *Decision) error {
	if len(reply) != replyHeader+replyPerCheck*n {
		d.fail()
		return errors.New("ratelimit: the decision script answered in an unknown form")
	}
	d.Allowed, d.Refused, d.RetryAfter, d.Never, d.At = reply[0] == 1, int(reply[1]), time.Duration(reply[2])*time.Microsecond, reply[3] == 1, time.UnixMicro(reply[replyNow])
	for i := range n {
		d.Remaining[i] = reply[remainingAt(i)]
		d.Reset[i] = time.Duration(reply[remainingAt(i)+1]) * time.Microsecond
	}
	return nil
}

// remainingAt is where a decision's reply holds check i's remaining units; its reset follows.
func remainingAt(i int) int { return replyHeader + replyPerCheck*i }
