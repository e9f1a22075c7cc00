package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/redisserver"
)

// The hash tags of the Cluster tests, as the gateway's keys carry them: a tenant's and the global
// limits (two slots of the first primary), and two providers' (one slot on each other primary).
const (
	tenantTag    = "{tenant:acme}:"
	globalTag    = "{sluice:global}:"
	openaiTag    = "{openai}:"
	anthropicTag = "{anthropic}:"
)

// clusterStore returns a store on a cluster client built as ClusterClientOptions says, flushing
// every primary first.
func clusterStore(t *testing.T, cluster *redisserver.Cluster, opts ...RedisOption) (*Redis, *redis.ClusterClient) {
	t.Helper()
	client := cluster.ClientWith(t, *ClientOptions(redis.UniversalOptions{}).Cluster())
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.FlushAll(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return NewRedis(client, opts...), client
}

// TestClusterRunsTheSharedTable runs the table both stores pass on Redis Cluster, where a decision
// over several hash tags is taken in parts.
func TestClusterRunsTheSharedTable(t *testing.T) {
	cluster := redisserver.StartCluster(t)
	runCases(t, append(limiterCases(), redisCases()...), func(t *testing.T) store {
		s, _ := clusterStore(t, cluster, WithCallerClock())
		return s
	})
}

// probe reads what each limit has left, taking nothing.
func probe(t *testing.T, s *Redis, limits ...*Limit) []int64 {
	t.Helper()
	checks := make([]Check, len(limits))
	for i, l := range limits {
		checks[i] = Check{Limit: l, Lease: "probe"}
	}
	d, err := decide(s, context.Background(), checks, t0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining[:len(limits)]
}

// TestClusterDecisionOverSlotsTakesAllOrNothing checks a decision whose levels lie on three
// primaries: allowed, it takes from each; refused by a later level, or by the first, it leaves
// every level as it was, and reports what each had before it.
func TestClusterDecisionOverSlotsTakesAllOrNothing(t *testing.T) {
	s, _ := clusterStore(t, redisserver.StartCluster(t), WithCallerClock())
	ctx := context.Background()
	user := mustLimit(NewWindow(tenantTag+"user:alice:requests:day", LevelUser, Requests, 10, Calendar{Period: Day}))
	global := mustLimit(NewBucket(globalTag+"tokens:minute", LevelGlobal, Tokens, 100, time.Hour, 100))
	provider := mustLimit(NewConcurrency(openaiTag+"provider:inflight", LevelProvider, 1, time.Minute))
	decide := func(lease string, userCost, tokens int64) Decision {
		t.Helper()
		d, err := decide(s, ctx, []Check{{Limit: user, Cost: userCost}, {Limit: global, Cost: tokens}, {Limit: provider, Cost: 1, Lease: lease}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	if d := decide("a", 1, 30); !d.Allowed || d.Refused != -1 || d.Remaining[0] != 9 || d.Remaining[1] != 70 || d.Remaining[2] != 0 {
		t.Fatalf("first decision: %+v; want allowed with 9, 70 and 0 left", d)
	}
	d := decide("b", 1, 30) // the provider's one slot is taken
	if d.Allowed || d.Refused != 2 || d.Remaining[0] != 9 || d.Remaining[1] != 70 {
		t.Errorf("refused by the last level: %+v; want refused by check 2, reporting 9 and 70 left before it", d)
	}
	if got := probe(t, s, user, global, provider); got[0] != 9 || got[1] != 70 || got[2] != 0 {
		t.Errorf("after a refusal by the provider: %v left; want 9, 70, 0: the user and global levels as they were", got)
	}
	if err := s.Settle(ctx, "release-a", []Check{{Limit: provider, Cost: -1, Lease: "a"}}, t0); err != nil {
		t.Fatal(err)
	}
	d = decide("c", 11, 30) // more than the user's whole quota
	if d.Allowed || d.Refused != 0 || !d.Never || d.Remaining[1] != 70 || d.Remaining[2] != 1 {
		t.Errorf("refused by the first level: %+v; want refused for good by check 0, reporting 70 and 1 left", d)
	}
	if got := probe(t, s, user, global, provider); got[0] != 9 || got[1] != 70 || got[2] != 1 {
		t.Errorf("after a refusal by the user's quota: %v left; want 9, 70, 1: the later levels as they were", got)
	}
}

// TestClusterDecisionWithAFailedPartTakesNothing sends a decision over three primaries one of
// whose parts Redis refuses (its key holds a string): the caller gets the error, and the parts
// that took are undone.
func TestClusterDecisionWithAFailedPartTakesNothing(t *testing.T) {
	s, client := clusterStore(t, redisserver.StartCluster(t), WithCallerClock())
	ctx := context.Background()
	user := mustLimit(NewWindow(tenantTag+"user:alice:requests:day", LevelUser, Requests, 10, Calendar{Period: Day}))
	global := mustLimit(NewBucket(globalTag+"tokens:minute", LevelGlobal, Tokens, 100, time.Hour, 100))
	broken := mustLimit(NewConcurrency(openaiTag+"provider:inflight", LevelProvider, 1, time.Minute))
	if err := client.Set(ctx, broken.Key, "not a lease set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := decide(s, ctx, []Check{{Limit: user, Cost: 1}, {Limit: global, Cost: 30}, {Limit: broken, Cost: 1, Lease: "a"}}, t0)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("a decision with a broken part: %v; want Redis's WRONGTYPE error", err)
	}
	if got := probe(t, s, user, global); got[0] != 10 || got[1] != 100 {
		t.Errorf("after the failed decision: %v left; want 10 and 100, nothing taken", got)
	}
}

// TestClusterConcurrentDecisionsNeverOvershoot runs 100 goroutines over four gateway replicas,
// each with its own cluster client, deciding on a tenant's day quota, the global day's tokens and
// a provider's calls in flight, three slots on three primaries. Calls hold their slots until one
// is refused by the in-flight limit while it is full, so that refusals by the last level undo the
// first two all along. No level may ever pass its capacity, and each must count exactly what the
// allowed decisions took: nothing a refused decision reserved may stay taken.
func TestClusterConcurrentDecisionsNeverOvershoot(t *testing.T) {
	cluster := redisserver.StartCluster(t)
	const replicas, goroutines, attempts = 4, 100, 20
	const quota, tokens, inFlight = 500, 900, 5
	zone := dayEndingInTwelveHours(t, cluster.Nodes()[0].Client(t))
	checks := []Check{
		{Limit: mustLimit(NewWindow(tenantTag+"requests:day", LevelTenant, Requests, quota, Calendar{Period: Day, Location: zone})), Cost: 1},
		{Limit: mustLimit(NewWindow(globalTag+"tokens:day", LevelGlobal, Tokens, tokens, Calendar{Period: Day, Location: zone}))},
		{Limit: mustLimit(NewConcurrency(anthropicTag+"provider:inflight", LevelProvider, inFlight, time.Minute)), Cost: 1},
	}
	stores := make([]*Redis, replicas)
	for i := range stores {
		stores[i], _ = clusterStore(t, cluster)
	}

	var allowed, allowedTokens, running, mostRunning atomic.Int64
	var refusedBy [3]atomic.Int64
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
				mine[1].Cost = int64(10 + 5*(g%3)) // 10, 15 or 20 tokens: the global level runs out first
				mine[2].Lease = fmt.Sprintf("g%d-a%d", g, a)
				d, err := decide(store, context.Background(), mine, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					refusedBy[d.Refused].Add(1)
					if d.Refused == 2 && running.Load() >= inFlight {
						fill.Do(func() { close(full) })
					}
					continue
				}
				allowed.Add(1)
				allowedTokens.Add(mine[1].Cost)
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

	if refusedBy[1].Load() == 0 || refusedBy[2].Load() == 0 {
		t.Errorf("refusals by level: %d, %d, %d; want some by the global and the provider's levels, to undo the others", refusedBy[0].Load(), refusedBy[1].Load(), refusedBy[2].Load())
	}
	if got := mostRunning.Load(); got != inFlight {
		t.Errorf("%d requests were in flight at once; want the limit, %d", got, inFlight)
	}
	d, err := decide(stores[0], context.Background(), []Check{{Limit: checks[0].Limit}, {Limit: checks[1].Limit}, {Limit: checks[2].Limit, Lease: "probe"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := [3]int64{quota - d.Remaining[0], tokens - d.Remaining[1], inFlight - d.Remaining[2]}
	if want := [3]int64{allowed.Load(), allowedTokens.Load(), 0}; got != want {
		t.Errorf("the levels count %v requests, tokens and calls in flight; want what the %d allowed decisions took, %v", got, allowed.Load(), want)
	}
	if got[0] > quota || got[1] > tokens {
		t.Errorf("the levels count %d requests and %d tokens; capacities %d and %d", got[0], got[1], quota, tokens)
	}
}

// dayEndingInTwelveHours returns a zone whose day ends twelve hours from now by Redis's clock, so
// that a test on Redis's clock never crosses it.
func dayEndingInTwelveHours(t *testing.T, client *redis.Client) *time.Location {
	now := redisTime(t, client)
	return time.FixedZone("noon", -int(now.Sub(now.Truncate(24*time.Hour))/time.Second)+12*3600)
}

// TestClusterSettlementAppliesOncePerSlot settles a call over three primaries twice under one id,
// and then a settlement one of whose parts Redis refuses (its key holds a string): the other
// parts apply, and sent again under its id once the key is mended, only the failed part does.
func TestClusterSettlementAppliesOncePerSlot(t *testing.T) {
	s, client := clusterStore(t, redisserver.StartCluster(t), WithCallerClock())
	ctx := context.Background()
	tenant := mustLimit(NewWindow(tenantTag+"budget", LevelTenant, MicroDollars, 1000, Calendar{Period: Month}))
	global := mustLimit(NewWindow(globalTag+"tokens:day", LevelGlobal, Tokens, 1000, Calendar{Period: Day}))
	provider := mustLimit(NewConcurrency(anthropicTag+"provider:inflight", LevelProvider, 2, time.Minute))
	for _, lease := range []string{"a", "b"} {
		if d, err := decide(s, ctx, []Check{{Limit: tenant, Cost: 100}, {Limit: global, Cost: 100}, {Limit: provider, Cost: 1, Lease: lease}}, t0); err != nil || !d.Allowed {
			t.Fatalf("decision %s: %+v, %v; want allowed", lease, d, err)
		}
	}
	settlement := func(lease string) []Check {
		return []Check{{Limit: tenant, Cost: -40}, {Limit: global, Cost: -60}, {Limit: provider, Cost: -1, Lease: lease}}
	}
	for range 2 {
		if err := s.Settle(ctx, "a", settlement("a"), t0); err != nil {
			t.Fatal(err)
		}
	}
	if got := probe(t, s, tenant, global, provider); got[0] != 840 || got[1] != 860 || got[2] != 1 {
		t.Errorf("after settling a twice under one id: %v left; want 840, 860, 1", got)
	}

	// The provider's lease set is put aside and a string takes its place: that part fails.
	stash := anthropicTag + "stash"
	for _, err := range []error{client.Rename(ctx, provider.Key, stash).Err(), client.Set(ctx, provider.Key, "x", 0).Err()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, "b", settlement("b"), t0); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("a settlement with a broken part: %v; want Redis's WRONGTYPE error", err)
	}
	if got := probe(t, s, tenant, global); got[0] != 880 || got[1] != 920 {
		t.Errorf("after a settlement whose provider part failed: %v left; want 880, 920: the other parts applied", got)
	}
	for _, err := range []error{client.Del(ctx, provider.Key).Err(), client.Rename(ctx, stash, provider.Key).Err()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, "b", settlement("b"), t0); err != nil {
		t.Fatal(err)
	}
	if got := probe(t, s, tenant, global, provider); got[0] != 880 || got[1] != 920 || got[2] != 2 {
		t.Errorf("after sending b's settlement again: %v left; want 880, 920, 2: only the failed part applied", got)
	}
}

// TestClusterRenewKeepsLeasesInEverySlot renews a call's leases on two primaries: both outlive
// their first time to live, and a lease not renewed is freed.
func TestClusterRenewKeepsLeasesInEverySlot(t *testing.T) {
	s, _ := clusterStore(t, redisserver.StartCluster(t), WithCallerClock())
	ctx := context.Background()
	tenant := mustLimit(NewConcurrency(tenantTag+"inflight", LevelTenant, 1, time.Minute))
	provider := mustLimit(NewConcurrency(openaiTag+"provider:inflight", LevelProvider, 1, time.Minute))
	call := func(lease string) []Check {
		return []Check{{Limit: tenant, Cost: 1, Lease: lease}, {Limit: provider, Cost: 1, Lease: lease}}
	}
	decide := func(lease string, at time.Duration) Decision {
		t.Helper()
		d, err := decide(s, ctx, call(lease), t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := decide("a", 0); !d.Allowed {
		t.Fatalf("a: %+v; want allowed", d)
	}
	if err := s.Renew(ctx, call("a"), t0.Add(50*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := decide("b", time.Minute); d.Allowed || d.Refused != 0 || d.Remaining[0] != 0 || d.Remaining[1] != 0 {
		t.Errorf("b after a's first lease would have ended: %+v; want refused, a holding both slots", d)
	}
	if d := decide("b", 110*time.Second); !d.Allowed {
		t.Errorf("b once a's renewed lease ended: %+v; want allowed", d)
	}
}

// TestUndoGivesBackOnlyToTheWindowItTookFrom undoes a decision on a day's quota the next day,
// when the quota has started again: the new day keeps what it counts. The same undo within the
// day gives back.
func TestUndoGivesBackOnlyToTheWindowItTookFrom(t *testing.T) {
	u := newUndoing(t, mustLimit(NewWindow("{p}:day", LevelUser, Requests, 10, Calendar{Period: Day})))
	decided, undoAt, remaining := u.decided, u.undoAt, u.remaining

	yesterday := decided(3, 0) // 23:00
	decided(1, 2*time.Hour)    // 01:00 the next day
	undoAt(yesterday, 2*time.Hour)
	if got := remaining(2 * time.Hour); got != 9 {
		t.Errorf("after undoing yesterday's decision today: %d left; want 9, today's own use only", got)
	}
	today := decided(4, 3*time.Hour)
	undoAt(today, 3*time.Hour)
	if got := remaining(3 * time.Hour); got != 9 {
		t.Errorf("after undoing today's decision today: %d left; want 9", got)
	}
}

// TestClusterNeverSendsAScriptRunTwice stalls every primary for 1.5 s while a decision is on the
// wire, through a client whose read timeout is 0.2 s. A cluster client sends a command again
// after a timeout, up to three times; a script run sent again would take again. The caller gets
// an error, and the decision, which ran once Redis woke, counts once: its answer was lost, so it
// stays taken.
func TestClusterNeverSendsAScriptRunTwice(t *testing.T) {
	cluster := redisserver.StartCluster(t, redisserver.DebugCommand())
	opts := ClientOptions(redis.UniversalOptions{}).Cluster()
	opts.ReadTimeout = 200 * time.Millisecond
	client := cluster.ClientWith(t, *opts)
	s := NewRedis(client)
	ctx := context.Background()
	day := mustLimit(NewWindow(tenantTag+"requests:day", LevelTenant, Requests, 100, Calendar{Period: Day, Location: dayEndingInTwelveHours(t, cluster.Nodes()[0].Client(t))}))
	// A first decision, of cost zero, has the client learn the cluster's slots before the stall.
	if _, err := decide(s, ctx, []Check{{Limit: day}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	var stalls sync.WaitGroup
	for _, node := range cluster.Nodes() {
		stall(t, node, &stalls)
	}
	if _, err := decide(s, ctx, []Check{{Limit: day, Cost: 1}}, time.Now()); err == nil {
		t.Fatal("a decision while every primary stalls: answered; want an error")
	}
	stalls.Wait()
	s.pipeline.busy.Wait()
	window, err := client.Get(ctx, day.Key).Result()
	if _, used, _ := strings.Cut(window, " "); err != nil || used != "1" {
		t.Errorf("the day's quota holds %q, %v; want 1 used: the decision ran once", window, err)
	}
}

// stall makes node sleep for 1.5 s (DEBUG SLEEP), in the background, and returns once it does not
// answer.
func stall(t *testing.T, node *redisserver.Server, stalls *sync.WaitGroup) {
	t.Helper()
	ctx := context.Background()
	sleeper := node.Client(t)
	stalls.Go(func() { sleeper.Do(ctx, "debug", "sleep", "1.5") })
	probe := redis.NewClient(&redis.Options{Addr: node.Addr, ReadTimeout: 20 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for range 500 { // bounds the wait should the server never stall; it asserts no timing
		if probe.Ping(ctx).Err() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never stalled", node.Addr)
}
