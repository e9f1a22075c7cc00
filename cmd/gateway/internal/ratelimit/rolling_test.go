package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// minuteOf returns a rolling window of capacity units in any minute, in slots of a second, as the
// gateway counts a provider's per-minute limits.
func minuteOf(key string, capacity int64) *Limit {
	return mustLimit(NewRolling(key, LevelProvider, Tokens, capacity, time.Minute, 60))
}

// rollingCases hold what every store does alike with a rolling window. t0 starts a second, so
// the slot a step at t0+at takes from is its whole seconds.
func rollingCases() []limiterCase {
	return []limiterCase{
		{
			name:   "a rolling window lets its whole capacity through at once, and again once the second it took from is past",
			limits: []*Limit{minuteOf("{p}:minute", 10)},
			steps: []step{
				{at: 300 * time.Millisecond, costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				// The second from t0 counts until t0+61s: a decision in the second from t0+60s
				// counts it, since the minute before it began within it.
				{at: 30 * time.Second, costs: []int64{1}, want: result{Refused: 0, RetryAfter: 31 * time.Second, Remaining: []int64{0}}},
				{at: 61*time.Second - time.Microsecond, costs: []int64{1}, want: result{Refused: 0, RetryAfter: time.Microsecond, Remaining: []int64{0}}},
				{at: 61 * time.Second, costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a cost over a rolling window's capacity never passes",
			limits: []*Limit{minuteOf("{p}:never", 10)},
			steps: []step{
				{costs: []int64{11}, want: result{Refused: 0, Never: true, Remaining: []int64{0}}},
				{costs: []int64{1 << 62}, want: result{Refused: 0, Never: true, Remaining: []int64{0}}},
				{costs: []int64{4}, want: result{Allowed: true, Refused: -1, Remaining: []int64{6}}},
			},
		},
		{
			name:   "a refused decision waits for the oldest seconds that free enough",
			limits: []*Limit{minuteOf("{p}:oldest", 10)},
			steps: []step{
				{costs: []int64{4}, want: result{Allowed: true, Refused: -1, Remaining: []int64{6}}},
				{at: 10 * time.Second, costs: []int64{3}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3}}},
				{at: 20 * time.Second, costs: []int64{3}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				// 5 more need the 4 of t0's second and the 3 of t0+10s's: that second leaves at
				// t0+71s.
				{at: 30 * time.Second, costs: []int64{5}, want: result{Refused: 0, RetryAfter: 41 * time.Second, Remaining: []int64{0}}},
				{at: 61 * time.Second, costs: []int64{5}, want: result{Refused: 0, RetryAfter: 10 * time.Second, Remaining: []int64{4}}},
				{at: 71 * time.Second, costs: []int64{5}, want: result{Allowed: true, Refused: -1, Remaining: []int64{2}}},
			},
		},
		{
			name: "a refund into the newest second holds after a decision refused by another limit moved past it",
			limits: []*Limit{
				minuteOf("{p}:refunded-newest", 10),
				mustLimit(NewBucket("{p}:one-a-minute", LevelProvider, Requests, 1, time.Minute, 1)),
			},
			steps: []step{
				{costs: []int64{3, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{7, 0}}},
				// The minute would pass this call in the next second; the bucket refuses it, so
				// nothing is taken and the minute's newest second is still t0's.
				{at: time.Second, costs: []int64{1, 1}, want: result{Refused: 1, RetryAfter: 59 * time.Second, Remaining: []int64{7, 0}}},
				{at: time.Second, costs: []int64{-3, 0}, settle: true, took: after(0)},
				{at: time.Second, costs: []int64{1, 0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{9, 0}}},
				// t0's second, refunded, counts nothing once it is no longer the newest.
				{at: 2 * time.Second, costs: []int64{1, 0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{8, 0}}},
			},
		},
		{
			name:   "a settlement counts in the second its decision took from, while that second counts",
			limits: []*Limit{minuteOf("{p}:settled-where-taken", 10)},
			steps: []step{
				{costs: []int64{6}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4}}},
				{at: 30 * time.Second, costs: []int64{4}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				// The call of t0 used 1 of its 6: its refund frees 5 although the current
				// second holds nothing, and the call of t0+30s used 2 more than its 4.
				{at: 40 * time.Second, costs: []int64{-5}, settle: true, took: after(0)},
				{at: 40 * time.Second, costs: []int64{2}, settle: true, took: after(30 * time.Second)},
				{at: 40 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3}}},
				// t0's second is past, with what it held: a settlement of it changes nothing.
				{at: 61 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4}}},
				{at: 62 * time.Second, costs: []int64{-3}, settle: true, took: after(0)},
				{at: 62 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4}}},
				// A refund larger than its second holds empties it, and no more.
				{at: 62 * time.Second, costs: []int64{-10}, settle: true, took: after(30 * time.Second)},
				{at: 62 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{10}}},
			},
		},
		{
			name:   "a settlement whose decision is unknown counts in the current second, which never goes below zero",
			limits: []*Limit{minuteOf("{p}:settled", 10)},
			steps: []step{
				{costs: []int64{6}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4}}},
				{costs: []int64{-2}, settle: true},
				{costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{6}}},
				// Thirty seconds on, the current second holds nothing to refund.
				{at: 30 * time.Second, costs: []int64{-3}, settle: true},
				{at: 30 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{6}}},
				{at: 30 * time.Second, costs: []int64{3}, settle: true},
				{at: 30 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3}}},
				// t0's second is past; the 3 charged at t0+30s count until t0+91s.
				{at: 61 * time.Second, costs: []int64{0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{7}}},
				{at: 91 * time.Second, costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a clock that steps back takes from the newest second, which leaves last",
			limits: []*Limit{minuteOf("{p}:back", 10)},
			steps: []step{
				{at: 10 * time.Second, costs: []int64{5}, want: result{Allowed: true, Refused: -1, Remaining: []int64{5}}},
				{at: 5 * time.Second, costs: []int64{5}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: 70 * time.Second, costs: []int64{1}, want: result{Refused: 0, RetryAfter: time.Second, Remaining: []int64{0}}},
				{at: 71 * time.Second, costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name: "a refusal at another hash tag takes nothing from a rolling window",
			limits: []*Limit{
				mustLimit(NewWindow("{tenant:acme}:user", LevelUser, Requests, 5, Calendar{Period: Day})),
				minuteOf("{openai}:provider:tokens", 1000),
				mustLimit(NewBucket("{sluice:global}:requests", LevelGlobal, Requests, 1, time.Second, 1)),
			},
			steps: []step{
				{costs: []int64{1, 600, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4, 400, 0}}},
				{costs: []int64{1, 300, 1}, want: result{Refused: 2, RetryAfter: time.Second, Remaining: []int64{4, 400, 0}}},
				{at: time.Second, costs: []int64{1, 400, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3, 0, 0}}},
			},
		},
	}
}

// after returns a pointer to d, a step's took.
func after(d time.Duration) *time.Duration { return &d }

// taken is what an allowed decision took, and when.
type taken struct {
	at   time.Time
	cost int64
}

// testRollingNeverOvershoots drives a rolling window with a long random sequence of decisions,
// on a clock that moves on by up to three seconds at a time: every refusal's wait is exact (the
// cost passes then, and not a microsecond before), and no span of the period holds more than
// the capacity.
func testRollingNeverOvershoots(t *testing.T, s store, decisions int) {
	const capacity = 1000
	ctx := context.Background()
	l := minuteOf("{p}:random", capacity)
	rng := rand.New(rand.NewPCG(7, 11))
	decide := func(cost int64, at time.Time) Decision {
		t.Helper()
		d, err := decide(s, ctx, []Check{{Limit: l, Cost: cost}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	now := t0
	var allowed []taken
	for range decisions {
		now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))).Truncate(time.Microsecond))
		// Demand a little over the capacity, so that most decisions pass at any time in their
		// second, and some are refused.
		cost := 1 + rng.Int64N(60)
		if rng.IntN(100) == 0 {
			cost = capacity
		}
		d := decide(cost, now)
		if !d.Allowed {
			if d.Never || d.RetryAfter <= 0 {
				t.Fatalf("%d at %s refused with %+v; want a wait", cost, now.Sub(t0), d)
			}
			if early := decide(cost, now.Add(d.RetryAfter-time.Microsecond)); early.Allowed {
				t.Fatalf("%d at %s allowed a microsecond before the wait of %s ended", cost, now.Sub(t0), d.RetryAfter)
			}
			if rng.IntN(2) == 0 {
				continue // the caller gives up
			}
			now = now.Add(d.RetryAfter)
			if d = decide(cost, now); !d.Allowed {
				t.Fatalf("%d refused again once its wait ended, at %s: %+v", cost, now.Sub(t0), d)
			}
		}
		allowed = append(allowed, taken{now, cost})
	}
	checkEveryPeriod(t, allowed, time.Minute, capacity)
}

// checkEveryPeriod checks that no span of period holds more than capacity of what was taken.
// The fullest spans end at a decision, so it checks each span (at-period, at] of one.
func checkEveryPeriod(t *testing.T, allowed []taken, period time.Duration, capacity int64) {
	t.Helper()
	var sum int64
	first := 0
	for _, tk := range allowed {
		sum += tk.cost
		for !allowed[first].at.After(tk.at.Add(-period)) {
			sum -= allowed[first].cost
			first++
		}
		if sum > capacity {
			t.Fatalf("the minute before %s holds %d; want at most %d", tk.at.Sub(t0), sum, capacity)
		}
	}
}

func TestMemoryRollingNeverOvershoots(t *testing.T) {
	testRollingNeverOvershoots(t, NewMemory(), 20_000)
}

func TestRedisRollingNeverOvershoots(t *testing.T) {
	testRollingNeverOvershoots(t, NewRedis(redisserver.Start(t).Client(t), WithCallerClock()), 2_000)
}

func TestClusterRollingNeverOvershoots(t *testing.T) {
	s, _ := clusterStore(t, redisserver.StartCluster(t), WithCallerClock())
	testRollingNeverOvershoots(t, s, 1_000)
}

// TestRollingSteadyThroughput keeps a rolling window of 610 a minute busy, a call of one unit
// every 10 ms: in each 61 s it lets its whole capacity through, 60/61 of it each minute.
func TestRollingSteadyThroughput(t *testing.T) {
	const capacity, cycles = 610, 10
	ctx, m := context.Background(), NewMemory()
	l := minuteOf("{p}:steady", capacity)
	var allowed []taken
	for at := time.Duration(0); at < cycles*61*time.Second; at += 10 * time.Millisecond {
		d, err := decide(m, ctx, []Check{{Limit: l, Cost: 1}}, t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed = append(allowed, taken{t0.Add(at), 1})
		}
	}
	if got, want := len(allowed), capacity*cycles; got != want {
		t.Errorf("%d let through in %d × 61 s; want %d, the capacity every 61 s", got, cycles, want)
	}
	checkEveryPeriod(t, allowed, time.Minute, capacity)
}

// TestRollingSlotsMustBeWholeMicroseconds checks NewRolling's bounds.
func TestRollingSlotsMustBeWholeMicroseconds(t *testing.T) {
	for _, c := range []struct {
		capacity, slots int64
		period          time.Duration
		ok              bool
	}{
		{capacity: 1, slots: 60, period: time.Minute, ok: true},
		{capacity: 1 << 40, slots: 1000, period: time.Second, ok: true},
		{capacity: 0, slots: 60, period: time.Minute},
		{capacity: 1<<40 + 1, slots: 60, period: time.Minute},
		{capacity: 1, slots: 0, period: time.Minute},
		{capacity: 1, slots: 1001, period: 1001 * time.Second}, // whole microseconds, but too many slots
		{capacity: 1, slots: 7, period: time.Second},           // 142857.14… µs a slot
	} {
		_, err := NewRolling("{p}:r", LevelProvider, Tokens, c.capacity, c.period, c.slots)
		if (err == nil) != c.ok {
			t.Errorf("NewRolling(capacity %d, %s in %d slots) = %v; want ok %v", c.capacity, c.period, c.slots, err, c.ok)
		}
	}
}

// TestMemoryRollingDecisionsDoNotAllocate moves a rolling window through its slots: its ring is
// made when the key is first used, and no decision after allocates.
func TestMemoryRollingDecisionsDoNotAllocate(t *testing.T) {
	ctx, m := context.Background(), NewMemory()
	checks := []Check{{Limit: minuteOf("{p}:alloc", 1<<40), Cost: 800}}
	now := t0
	decide(m, ctx, checks, now)
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(300 * time.Millisecond)
		if d, _ := decide(m, ctx, checks, now); !d.Allowed {
			t.Fatal("refused")
		}
	})
	if allocs != 0 {
		t.Errorf("a decision allocates %.1f times; want none", allocs)
	}
}

// TestSweepDropsARollingWindowOnceItCountsNothing checks that a rolling window's key is kept
// while any second it took from counts, and dropped after.
func TestSweepDropsARollingWindowOnceItCountsNothing(t *testing.T) {
	ctx, m := context.Background(), NewMemory()
	l := minuteOf("{p}:swept", 10)
	for _, at := range []time.Duration{0, 30 * time.Second} {
		if _, err := decide(m, ctx, []Check{{Limit: l, Cost: 1}}, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	m.Sweep(t0.Add(90 * time.Second))
	if m.Len() != 1 {
		t.Errorf("after sweeping at +90s, %d keys; want 1: the second from t0+30s counts until t0+91s", m.Len())
	}
	m.Sweep(t0.Add(91 * time.Second))
	if m.Len() != 0 {
		t.Errorf("after sweeping at +91s, %d keys; want 0", m.Len())
	}
}

// TestRollingPeek peeks at a rolling window that took in three seconds: the reading says what a
// decision of cost zero would, Reset is when the last second that took leaves the window, and
// Wait when enough seconds have left it for the cost peeked for.
func TestRollingPeek(t *testing.T) {
	for name, s := range map[string]func(t *testing.T) peeker{
		"memory": func(*testing.T) peeker { return NewMemory() },
		"redis": func(t *testing.T) peeker {
			return NewRedis(redisserver.Start(t).Client(t), WithCallerClock())
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, s := context.Background(), s(t)
			l := minuteOf("{p}:peeked", 100)
			for _, at := range []time.Duration{0, 20 * time.Second, 40 * time.Second} {
				if d, err := decide(s, ctx, []Check{{Limit: l, Cost: 20}}, t0.Add(at)); err != nil || !d.Allowed {
					t.Fatalf("Decide at +%s: %+v, %v", at, d, err)
				}
			}
			at := t0.Add(70 * time.Second) // t0's second is past
			got, err := s.Peek(ctx, Reads(l), at)
			want := Reading{Remaining: 60, Reset: 31 * time.Second}
			if err != nil || len(got) != 1 || got[0] != want {
				t.Errorf("Peek at +70s = %v, %v; want %v", got, err, want)
			}
			// What the window holds for a cost: 60 at once, 70 once the second from +20s is
			// past, all of it once the one from +40s is too, and never more than all.
			waits := map[int64]time.Duration{60: 0, 70: 11 * time.Second, 100: 31 * time.Second, 101: 0}
			for cost, wait := range waits {
				got, err := s.Peek(ctx, []Check{{Limit: l, Cost: cost}}, at)
				if want := (Reading{Remaining: 60, Reset: 31 * time.Second, Wait: wait}); err != nil || got[0] != want {
					t.Errorf("Peek for %d at +70s = %v, %v; want %v", cost, got, err, want)
				}
			}
		})
	}
}

// TestUndoGivesBackOnlyToTheSlotItTookFrom undoes decisions on a rolling window: within the
// minute, the second a decision took from gets its cost back; once that second has left the
// window, an undo gives nothing, and never to a newer second.
func TestUndoGivesBackOnlyToTheSlotItTookFrom(t *testing.T) {
	u := newUndoing(t, minuteOf("{p}:undone", 10))
	decided, undoAt, remaining := u.decided, u.undoAt, u.remaining

	first := decided(3, 0)
	second := decided(4, 30*time.Second)
	undoAt(second, 45*time.Second) // its second still counts, and gets its 4 back
	if got := remaining(45 * time.Second); got != 7 {
		t.Errorf("after undoing the decision at +30s: %d left; want 7", got)
	}
	decided(5, 62*time.Second)
	undoAt(first, 62*time.Second) // t0's second left at +61s: nothing to give back, and +62s keeps its 5
	if got := remaining(62 * time.Second); got != 5 {
		t.Errorf("after undoing t0's decision once its second left: %d left; want 5, +62s's own use only", got)
	}

	// An undo gives back to a second older than the newest, and only to it.
	older := decided(1, 70*time.Second)
	decided(2, 80*time.Second)
	undoAt(older, 85*time.Second)
	if got := remaining(85 * time.Second); got != 3 {
		t.Errorf("after undoing the decision at +70s at +85s: %d left; want 3, +62s's 5 and +80s's 2", got)
	}
	if got := remaining(123 * time.Second); got != 8 {
		t.Errorf("at +123s: %d left; want 8, +80s's 2 only", got)
	}
}

// TestRedisRollingWindowLivesUntilItsLastSecondIsPast checks a rolling window's expiry: a period
// and a slot after the start of the second it last took from, and no value once nothing counts.
func TestRedisRollingWindowLivesUntilItsLastSecondIsPast(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	store := NewRedis(client, WithCallerClock())
	l := minuteOf("{p}:expiring", 10)
	at := t0.Add(2500 * time.Millisecond)
	checkExpiry(t, client, l.Key, 60500*time.Millisecond, func() error { // its second leaves at t0+63s
		_, err := decide(store, ctx, []Check{{Limit: l, Cost: 3}}, at)
		return err
	})
	if v, err := client.Get(ctx, l.Key).Result(); err != nil || v != fmt.Sprint(t0.Unix()+2, " 3 0") {
		t.Errorf("the window holds %q, %v; want its newest second, its 3, and nothing before", v, err)
	}
	if err := store.Settle(ctx, "refund", []Check{{Limit: l, Cost: -3}}, at); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, l.Key).Result(); err != nil || n != 0 {
		t.Errorf("a window that counts nothing: %d keys, %v; want dropped", n, err)
	}
}

// TestRedisRollingWindowReadsABucketAsEmpty checks the upgrade of a provider's limit from a bucket
// to a rolling window under the same key: the bucket's value, one number, reads as an empty
// window, to Peek as to a decision, which then stores a window's value.
func TestRedisRollingWindowReadsABucketAsEmpty(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	store := NewRedis(client, WithCallerClock())
	l := minuteOf("{p}:upgraded", 10)
	if err := client.Set(ctx, l.Key, fmt.Sprint(t0.Add(time.Hour).UnixMicro(), ".5"), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Peek(ctx, Reads(l), t0); err != nil || len(got) != 1 || got[0] != (Reading{Remaining: 10}) {
		t.Errorf("Peek of a bucket's value = %v, %v; want an empty window", got, err)
	}
	if d, err := decide(store, ctx, []Check{{Limit: l, Cost: 10}}, t0); err != nil || !d.Allowed {
		t.Errorf("the whole capacity on a bucket's value: %+v, %v; want allowed", d, err)
	}
	if v, err := client.Get(ctx, l.Key).Result(); err != nil || v != fmt.Sprint(t0.Unix(), " 10 0") {
		t.Errorf("the key holds %q, %v; want the window's value", v, err)
	}
}

// undoing decides, undoes and reads one limit on a Redis store of its own, at times after t0,
// and fails its test on any error.
type undoing struct {
	t *testing.T
	s *Redis
	l *Limit
}

func newUndoing(t *testing.T, l *Limit) undoing {
	return undoing{t: t, s: NewRedis(redisserver.Start(t).Client(t), WithCallerClock()), l: l}
}

// decided takes cost at +at, which must be allowed, and returns the run to undo.
func (u undoing) decided(cost int64, at time.Duration) *scriptRun {
	u.t.Helper()
	run, err := u.s.newRun("decide", []Check{{Limit: u.l, Cost: cost}}, t0.Add(at))
	if err != nil {
		u.t.Fatal(err)
	}
	if _, err := u.s.send(context.Background(), run); err != nil || !run.allowed() {
		u.t.Fatalf("decision of %d at +%s: %v, %v; want allowed", cost, at, run.reply, err)
	}
	return run
}

// undoAt undoes the decision run at +at.
func (u undoing) undoAt(run *scriptRun, at time.Duration) {
	u.t.Helper()
	undo := run.undo(nil)[0]
	undo.clock = fmt.Sprint(t0.Add(at).UnixMicro())
	if _, err := u.s.send(context.Background(), undo); err != nil {
		u.t.Fatal(err)
	}
}

// remaining reads what the limit has left at +at.
func (u undoing) remaining(at time.Duration) int64 {
	u.t.Helper()
	d, err := decide(u.s, context.Background(), []Check{{Limit: u.l}}, t0.Add(at))
	if err != nil {
		u.t.Fatal(err)
	}
	return d.Remaining[0]
}
