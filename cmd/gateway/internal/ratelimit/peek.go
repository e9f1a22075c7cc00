package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Peek reads what each check's limit holds, as a decision of cost zero would, and how long one
// of the check's cost would wait (see Reading), and changes nothing.
// However many the limits, it costs one round trip: a pipeline of plain reads of one key each,
// which suits Redis Cluster whatever the keys' hash tags, evaluated here on Redis's own clock
// (on now with WithCallerClock). A read costs Redis far less than a script run, so that a usage
// snapshot reads thousands of budgets at once.
func (r *Redis) Peek(ctx context.Context, checks []Check, now time.Time) ([]Reading, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	pipe := r.pipeline.client.Pipeline()
	clock := pipe.Time(ctx)
	reads := make([]redis.Cmder, len(checks))
	for i, c := range checks {
		if l := c.Limit; l.kind == concurrency {
			reads[i] = pipe.ZRangeWithScores(ctx, l.Key, 0, -1)
		} else {
			reads[i] = pipe.Get(ctx, l.Key)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("ratelimit: read %d limits: %w", len(checks), err)
	}
	if !r.trustCallers {
		now = clock.Val()
	}
	out := make([]Reading, len(checks))
	for i, c := range checks {
		s, older, err := storedState(c.Limit, reads[i], now)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: read %q: %w", c.Limit.Key, err)
		}
		out[i] = reading(c.Limit, s, older, c.Cost, now.UnixNano())
	}
	return out, nil
}

// storedState converts the state the decision script keeps for l (see decide.lua), in
// microseconds, to the core's, in nanoseconds, with a rolling window's ring. A key that does not
// exist has the zero state.
func storedState(l *Limit, read redis.Cmder, now time.Time) (state, *slotRing, error) {
	if z, ok := read.(*redis.ZSliceCmd); ok { // concurrency: leases scored by expiry
		var held int64
		for _, lease := range z.Val() {
			if lease.Score > float64(now.UnixMicro()) {
				held++
			}
		}
		return state{b: held}, nil, nil
	}
	v, err := read.(*redis.StringCmd).Result()
	if errors.Is(err, redis.Nil) {
		return state{}, nil, nil
	}
	switch l.kind {
	case bucket:
		return bucketState(v)
	case rolling:
		return rollingState(l, v)
	}
	end, used, err := parseWindowValue(v)
	return state{a: end * 1000, b: used}, nil, err
}

// bucketState parses a bucket's value: its theoretical arrival time, and for a pace whose
// requests within its burst wait for an earlier one, that one after a space (else the same).
func bucketState(v string) (state, *slotRing, error) {
	first, second, spaced := strings.Cut(v, " ")
	if !spaced {
		second = first
	}
	tat, err1 := strconv.ParseFloat(first, 64)
	within, err2 := strconv.ParseFloat(second, 64)
	return state{a: int64(tat * 1000), b: int64(within * 1000)}, nil, errors.Join(err1, err2)
}

// rollingState parses a rolling window's value, "newest count older count...": the newest slot,
// its count, the sum of the older counts (which the script keeps so as not to read them while
// the clock stays in the newest slot), then the count of each slot before the newest. A value of
// another form (a bucket's, from before the limit was a rolling window) counts nothing, as in the
// script.
func rollingState(l *Limit, v string) (state, *slotRing, error) {
	fields := strings.Fields(v)
	var s state
	older := newSlotRing(l)
	if len(fields) < 3 {
		return s, older, nil
	}
	var err1, err2 error
	s.a, err1 = strconv.ParseInt(fields[0], 10, 64)
	s.b, err2 = strconv.ParseInt(fields[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return state{}, nil, err
	}
	for i, f := range fields[3:min(len(fields), int(l.slots)+3)] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return state{}, nil, err
		}
		older.put(s.a-1-int64(i), n)
	}
	return s, older, nil
}
