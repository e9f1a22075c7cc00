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

// TestRedisSharedByReplicas runs 100 goroutines spread over four gateway replicas, each with its
// own client of one Redis on Redis's own clock, and checks that together they never take more
// than a level allows: not more than the bucket's burst (which refills once an hour), not more
// than the day's quota, and never more than the concurrency limit in flight at once. Calls hold
// their slots until a call is refused by the in-flight limit while it is full, so that they truly
// overlap: the most running at once must reach the limit, and never pass it.
func TestRedisSharedByReplicas(t *testing.T) {
	server := redisserver.Start(t)
	const replicas, goroutines, attempts = 4, 100, 20
	const burst, quota, inFlight = 900, 600, 5
	checks := []Check{
		{Limit: mustLimit(NewBucket("{p}:tenant", LevelTenant, Requests, 1, time.Hour, burst)), Cost: 1},
		{Limit: mustLimit(NewWindow("{p}:user", LevelUser, Requests, quota, Calendar{Period: Day})), Cost: 1},
		{Limit: mustLimit(NewConcurrency("{p}:inflight", LevelProvider, inFlight, time.Minute)), Cost: 1},
	}
	stores := make([]*Redis, replicas)
	for i := range stores {
		stores[i] = NewRedis(redis.NewClient(&redis.Options{Addr: server.Addr}))
	}

	var allowed, running, mostRunning atomic.Int64
	full := make(chan struct{})
	var fill sync.Once
	// Bounds the wait for the limit to refuse, should decisions fail; it asserts no timing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			store := stores[g%replicas]
			for a := range attempts {
				mine := append([]Check(nil), checks...)
				mine[2].Lease = fmt.Sprintf("g%d-a%d", g, a)
				d, err := decide(store, context.Background(), mine, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					if d.Refused == 2 && running.Load() >= inFlight {
						fill.Do(func() { close(full) })
					}
					continue
				}
				allowed.Add(1)
				n := running.Add(1)
				for cur := mostRunning.Load(); n > cur && !mostRunning.CompareAndSwap(cur, n); cur = mostRunning.Load() {
				}
				select { // the call runs, holding its slot
				case <-full:
				case <-ctx.Done():
				}
				running.Add(-1)
				release := []Check{{Limit: mine[2].Limit, Cost: -1, Lease: mine[2].Lease}}
				if err := store.Settle(context.Background(), mine[2].Lease, release, time.Now()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	if got := allowed.Load(); got > quota {
		t.Errorf("allowed %d requests; the day's quota is %d", got, quota)
	}
	if got := mostRunning.Load(); got != inFlight {
		t.Errorf("%d requests were in flight at once; want the limit, %d", got, inFlight)
	}
	// A decision of cost zero reads what the day's quota has left without taking anything.
	d, err := decide(stores[0], context.Background(), []Check{{Limit: checks[1].Limit}}, time.Now())
	if used := quota - d.Remaining[0]; err != nil || used != allowed.Load() {
		t.Errorf("the quota counted %d, %v; want the %d allowed", used, err, allowed.Load())
	}
}
