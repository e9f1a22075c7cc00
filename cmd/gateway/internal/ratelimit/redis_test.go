package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/redisserver"
)

// redisTime returns Redis's own clock.
func redisTime(t *testing.T, client redis.UniversalClient) time.Time {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// checkExpiry checks that key expires ttl after Redis ran do: no sooner than ttl after Redis's
// clock before do, and no later than ttl after it after do.
func checkExpiry(t *testing.T, client *redis.Client, key string, ttl time.Duration, do func() error) {
	t.Helper()
	before := redisTime(t, client).UnixMilli()
	if err := do(); err != nil {
		t.Fatal(err)
	}
	after := redisTime(t, client).UnixMilli()
	got, err := client.PExpireTime(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if at := got.Milliseconds(); at < before+ttl.Milliseconds() || at > after+ttl.Milliseconds() {
		t.Errorf("%s expires at %d ms; want %s after Redis ran the script, between %d and %d", key, at, ttl, before+ttl.Milliseconds(), after+ttl.Milliseconds())
	}
}

// TestRedisKeysLiveUntilWhole checks each key's expiry after a run against the time until its
// limit is whole again: a bucket full, a window ended, the last lease expired; and that a
// settlement's record lives as long as its longest lease, and at least settledFor.
func TestRedisKeysLiveUntilWhole(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	store := NewRedis(client, WithCallerClock())
	hourly := mustLimit(NewBucket("{p}:hourly", LevelUser, Requests, 1, time.Hour, 10))
	day := mustLimit(NewWindow("{p}:day", LevelUser, Requests, 10, Calendar{Period: Day}))
	calls := mustLimit(NewConcurrency("{p}:calls", LevelProvider, 10, 5*time.Minute))
	// The same key in a configuration that gives leases longer: a renewal keeps them that long.
	longer := mustLimit(NewConcurrency("{p}:calls", LevelProvider, 10, 20*time.Minute))
	decide := func(checks ...Check) func() error {
		return func() error { _, err := decide(store, ctx, checks, t0); return err }
	}

	t.Run("a bucket lives until it is full", func(t *testing.T) {
		checkExpiry(t, client, hourly.Key, 3*time.Hour, decide(Check{Limit: hourly, Cost: 3}))
		checkExpiry(t, client, hourly.Key, 5*time.Hour, func() error {
			return store.Settle(ctx, "more", []Check{{Limit: hourly, Cost: 2}}, t0)
		})
	})
	t.Run("a window lives until it ends", func(t *testing.T) {
		checkExpiry(t, client, day.Key, time.Hour, decide(Check{Limit: day, Cost: 1})) // t0 is 23:00 UTC
	})
	t.Run("a lease set lives as long as its lease", func(t *testing.T) {
		checkExpiry(t, client, calls.Key, 5*time.Minute, decide(Check{Limit: calls, Cost: 1, Lease: "a"}))
		checkExpiry(t, client, calls.Key, 20*time.Minute, func() error {
			return store.Renew(ctx, []Check{{Limit: longer, Cost: 1, Lease: "a"}}, t0)
		})
	})
	t.Run("a settlement is remembered as long as its longest lease", func(t *testing.T) {
		checkExpiry(t, client, "{p}:settled:with-lease", 20*time.Minute, func() error {
			return store.Settle(ctx, "with-lease", []Check{{Limit: day, Cost: -1}, {Limit: longer, Cost: -1, Lease: "a"}}, t0)
		})
		checkExpiry(t, client, "{p}:settled:without", settledFor, func() error {
			return store.Settle(ctx, "without", []Check{{Limit: day, Cost: 1}}, t0)
		})
	})
}

// TestRedisWindowRollsOnRedisClock crosses a window boundary on Redis's own clock, as in
// production, with a gateway whose clock lags Redis's: by Redis's clock the day began 30 seconds
// ago (a time zone puts midnight there), and the gateway still thinks it is yesterday. Yesterday's
// quota, used up, must not count, and today's must hold from its first call.
func TestRedisWindowRollsOnRedisClock(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	midnight := redisTime(t, client).Truncate(time.Second).Add(-30 * time.Second)
	secondsIntoUTCDay := midnight.Sub(midnight.Truncate(24 * time.Hour))
	zone := time.FixedZone("midnight-30s-ago", -int(secondsIntoUTCDay/time.Second))
	day := mustLimit(NewWindow("{p}:day", LevelUser, Requests, 2, Calendar{Period: Day, Location: zone}))
	checks := []Check{{Limit: day, Cost: 1}}

	// Yesterday's state, left by a decision a minute before midnight.
	yesterday := NewRedis(client, WithCallerClock())
	if d, err := decide(yesterday, ctx, []Check{{Limit: day, Cost: 2}}, midnight.Add(-time.Minute)); err != nil || !d.Allowed {
		t.Fatalf("yesterday's decision: %+v, %v; want allowed", d, err)
	}

	store, lagging := NewRedis(client), midnight.Add(-time.Second)
	for i, want := range []int64{1, 0} {
		d, err := decide(store, ctx, checks, lagging)
		if err != nil || !d.Allowed || d.Remaining[0] != want {
			t.Fatalf("today's call %d: %+v, %v; want allowed with %d left", i+1, d, err, want)
		}
	}
	before := redisTime(t, client)
	d, err := decide(store, ctx, checks, lagging)
	after := redisTime(t, client)
	tomorrow := midnight.Add(24 * time.Hour)
	if err != nil || d.Allowed || d.RetryAfter < tomorrow.Sub(after) || d.RetryAfter > tomorrow.Sub(before) {
		t.Errorf("today's third call: %+v, %v; want refused until tomorrow's midnight, in %s to %s", d, err, tomorrow.Sub(after), tomorrow.Sub(before))
	}
}

// TestRedisStallChargesOnlyWhatItAllowed stalls Redis for 1.5 s (three times the callers' wait)
// in the middle of concurrent decisions and settlements through a client built as the gateway
// builds its own. Callers that time out get errors; each accepted call settles, sending its
// settlement again until it is answered. Afterwards Redis holds exactly what the accepted calls
// were charged and settled: no run applied twice, none that answered an error took anything.
func TestRedisStallChargesOnlyWhatItAllowed(t *testing.T) {
	ctx := context.Background()
	server := redisserver.Start(t, redisserver.DebugCommand())
	client := redis.NewUniversalClient(ClientOptions(redis.UniversalOptions{Addrs: []string{server.Addr}}))
	t.Cleanup(func() { client.Close() })
	store := NewRedis(client)

	// A day that ends twelve hours from now by Redis's clock, so that the test never crosses it.
	now := redisTime(t, client)
	zone := time.FixedZone("noon", -int(now.Sub(now.Truncate(24*time.Hour))/time.Second)+12*3600)
	day := Calendar{Period: Day, Location: zone}
	requests := mustLimit(NewWindow("{p}:requests", LevelTenant, Requests, 1<<40, day))
	tokens := mustLimit(NewWindow("{p}:tokens", LevelTenant, Tokens, 1<<40, day))
	calls := mustLimit(NewConcurrency("{p}:calls", LevelProvider, 1<<20, 10*time.Minute))

	const callers, rounds, stallAfter = 16, 60, 100
	var accepted, failed atomic.Int64
	var stall sync.Once
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for r := range rounds {
				lease := fmt.Sprintf("c%d-r%d", c, r)
				checks := []Check{{Limit: requests, Cost: 1}, {Limit: tokens, Cost: 10}, {Limit: calls, Cost: 1, Lease: lease}}
				d, err := decide(store, ctx, checks, time.Now())
				if err != nil {
					failed.Add(1)
					continue
				}
				if !d.Allowed {
					t.Errorf("%s: refused: %+v", lease, d)
					continue
				}
				if accepted.Add(1) == stallAfter {
					stall.Do(func() { go server.Client(t).Do(ctx, "debug", "sleep", "1.5") })
				}
				settleUntilAnswered(t, store, lease, []Check{{Limit: tokens, Cost: 5}, {Limit: calls, Cost: -1, Lease: lease}})
			}
		})
	}
	wg.Wait()
	store.pipeline.busy.Wait() // give-backs of decisions whose callers left

	if failed.Load() == 0 {
		t.Fatal("no call failed: the stall was not felt, and the test shows nothing")
	}
	d, err := decide(store, ctx, []Check{{Limit: requests}, {Limit: tokens}, {Limit: calls, Lease: "probe"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := accepted.Load()
	got := [3]int64{requests.Capacity() - d.Remaining[0], tokens.Capacity() - d.Remaining[1], calls.Capacity() - d.Remaining[2]}
	if want := [3]int64{n, 15 * n, 0}; got != want {
		t.Errorf("after %d accepted and %d failed calls, Redis counts %v requests, tokens and calls in flight; want %v", n, failed.Load(), got, want)
	}
}

// settleUntilAnswered sends a settlement until Redis answers it, as a caller that does not know
// whether a timed-out settlement went through does.
func settleUntilAnswered(t *testing.T, store *Redis, id string, checks []Check) {
	for range 20 {
		if store.Settle(context.Background(), id, checks, time.Now()) == nil {
			return
		}
	}
	t.Errorf("settlement %s: never answered", id)
}
