package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// TestPipelineAnswersEachCaller sends many concurrent decisions on distinct keys through one
// store, so that they share round trips, and checks that each caller gets its own answer: the
// remaining amount of its own key.
func TestPipelineAnswersEachCaller(t *testing.T) {
	server := redisserver.Start(t)
	store := NewRedis(server.Client(t))
	const callers = 200
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			l := mustLimit(NewBucket(fmt.Sprintf("{p}:caller:%d", i), LevelUser, Requests, 1, time.Hour, 1000))
			cost := int64(i + 1)
			d, err := decide(store, context.Background(), []Check{{Limit: l, Cost: cost}}, time.Now())
			if err != nil {
				t.Error(err)
				return
			}
			if !d.Allowed || d.Remaining[0] != 1000-cost {
				t.Errorf("caller %d: %+v; want allowed with %d remaining", i, d, 1000-cost)
			}
		})
	}
	wg.Wait()
}

// TestPipelineLoadsTheScriptAgain checks that decisions and settlements go on after Redis forgets
// the script, and that each is applied once: a call answered NOSCRIPT did not run.
func TestPipelineLoadsTheScriptAgain(t *testing.T) {
	server := redisserver.Start(t)
	client := server.Client(t)
	store := NewRedis(client)
	l := mustLimit(NewBucket("{p}:k", LevelUser, Requests, 1, time.Hour, 10))
	checks := []Check{{Limit: l, Cost: 1}}
	for i := range 2 {
		if err := client.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := decide(store, context.Background(), checks, time.Now()); err != nil {
			t.Fatalf("Decide after SCRIPT FLUSH: %v", err)
		}
		if err := client.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := store.Settle(context.Background(), fmt.Sprint("s", i), checks, time.Now()); err != nil {
			t.Fatalf("Settle after SCRIPT FLUSH: %v", err)
		}
	}
	d, err := decide(store, context.Background(), []Check{{Limit: l}}, time.Now())
	if err != nil || d.Remaining[0] != 6 {
		t.Errorf("after two decisions and two settlements of 1: %d left, %v; want 6", d.Remaining[0], err)
	}
}

// TestBatchedDecisionsTakeAllOrNothing sends concurrent decisions that share a tenant's bucket,
// so that they go in shared script runs, while every other caller asks more than its own limit
// allows. Those are refused and must take nothing from the shared bucket: exactly the other
// half pass, and the bucket counts exactly them.
func TestBatchedDecisionsTakeAllOrNothing(t *testing.T) {
	server := redisserver.Start(t)
	store := NewRedis(server.Client(t))
	const callers, tenantBurst = 200, 150
	tenant := mustLimit(NewBucket("{p}:tenant", LevelTenant, Requests, 1, time.Hour, tenantBurst))
	var allowed, refusedByUser atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			user := mustLimit(NewBucket(fmt.Sprintf("{p}:user:%d", i), LevelUser, Requests, 1, time.Hour, 1))
			checks := []Check{{Limit: tenant, Cost: 1}, {Limit: user, Cost: int64(1 + i%2)}}
			d, err := decide(store, context.Background(), checks, time.Now())
			switch {
			case err != nil:
				t.Error(err)
			case d.Allowed:
				allowed.Add(1)
			case d.Refused == 1 && d.Never:
				refusedByUser.Add(1)
			default:
				t.Errorf("caller %d: %+v; want allowed, or refused for good by its own limit", i, d)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != callers/2 || refusedByUser.Load() != callers/2 {
		t.Fatalf("%d allowed and %d refused by their own limit; want %d each", allowed.Load(), refusedByUser.Load(), callers/2)
	}
	d, err := decide(store, context.Background(), []Check{{Limit: tenant}}, time.Now())
	if err != nil || d.Remaining[0] != tenantBurst-callers/2 {
		t.Errorf("the tenant's bucket has %d left, %v; want %d", d.Remaining[0], err, tenantBurst-callers/2)
	}
}

// TestABadRunFailsOnlyItsCaller sends one decision that Redis refuses (its concurrency key holds
// a string) among many good ones sharing its hash tag: the good ones are answered, the bad one
// gets Redis's error. The good ones fill an in-flight limit exactly, so a run sent again after
// the refused script had taken its lease would find itself counted, and be refused.
func TestABadRunFailsOnlyItsCaller(t *testing.T) {
	server := redisserver.Start(t)
	client := server.Client(t)
	if err := client.Set(context.Background(), "{p}:not-a-set", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	store := NewRedis(client)
	const callers = 100
	shared := mustLimit(NewConcurrency("{p}:shared", LevelTenant, callers-1, time.Minute))
	bad := mustLimit(NewConcurrency("{p}:not-a-set", LevelProvider, 5, time.Minute))
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			checks := []Check{{Limit: shared, Cost: 1, Lease: fmt.Sprint(i)}}
			if i == callers/2 {
				checks = append(checks, Check{Limit: bad, Cost: 1, Lease: "l"})
			}
			d, err := decide(store, context.Background(), checks, time.Now())
			if i == callers/2 {
				if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
					t.Errorf("the bad decision: %+v, %v; want Redis's WRONGTYPE error", d, err)
				}
				return
			}
			if err != nil || !d.Allowed {
				t.Errorf("caller %d: %+v, %v; want allowed", i, d, err)
			}
		})
	}
	wg.Wait()
}

// TestBatchedInFlightCountsEachCallOnce fills an in-flight limit with concurrent decisions that
// share script runs: each takes one slot, so all pass and the next is refused; released, the
// slots are free again.
func TestBatchedInFlightCountsEachCallOnce(t *testing.T) {
	store := NewRedis(redisserver.Start(t).Client(t))
	const callers = 100
	inFlight := mustLimit(NewConcurrency("{p}:in-flight", LevelProvider, callers, time.Minute))
	lease := func(i int) []Check { return []Check{{Limit: inFlight, Cost: 1, Lease: fmt.Sprint(i)}} }
	release := func(i int) []Check { return []Check{{Limit: inFlight, Cost: -1, Lease: fmt.Sprint(i)}} }
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if d, err := decide(store, context.Background(), lease(i), time.Now()); err != nil || !d.Allowed {
				t.Errorf("call %d of %d on a limit of %d: %+v, %v; want allowed", i+1, callers, callers, d, err)
			}
		})
	}
	wg.Wait()
	if d, err := decide(store, context.Background(), lease(callers), time.Now()); err != nil || d.Allowed {
		t.Errorf("one call more: %+v, %v; want refused", d, err)
	}
	for i := range callers {
		wg.Go(func() {
			if err := store.Settle(context.Background(), fmt.Sprint("release-", i), release(i), time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if d, err := decide(store, context.Background(), []Check{{Limit: inFlight, Lease: "probe"}}, time.Now()); err != nil || d.Remaining[0] != callers {
		t.Errorf("after every release: %d free, %v; want %d", d.Remaining[0], err, callers)
	}
}

func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"{openai}:tenant:acme": "openai",
		"a{b}c{d}":             "b",
		"{}:x":                 "{}:x",
		"no-tag":               "no-tag",
		"open{only":            "open{only",
	} {
		if got := hashTag(key); got != want {
			t.Errorf("hashTag(%q) = %q; want %q", key, got, want)
		}
	}
}
