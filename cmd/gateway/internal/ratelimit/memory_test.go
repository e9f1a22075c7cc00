package ratelimit

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"
)

func TestSweepDropsOnlyIdleKeys(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	busy := mustLimit(NewBucket("{p}:busy", LevelUser, Requests, 1, time.Minute, 10))
	idle := mustLimit(NewBucket("{p}:idle", LevelUser, Requests, 1, time.Second, 10))
	day := mustLimit(NewWindow("{p}:day", LevelUser, Requests, 10, Calendar{Period: Day}))
	for _, l := range []*Limit{busy, idle, day} {
		if _, err := decide(m, ctx, []Check{{Limit: l, Cost: 1}}, t0); err != nil {
			t.Fatal(err)
		}
	}

	m.Sweep(t0.Add(2 * time.Second)) // idle's bucket is full again; busy's is not; the day goes on
	if got := m.Len(); got != 2 {
		t.Errorf("after sweeping at +2s, %d keys hold state; want 2 (busy and day)", got)
	}
	m.Sweep(t0.Add(2 * time.Hour)) // past midnight and a full minute's refill
	if got := m.Len(); got != 0 {
		t.Errorf("after sweeping at +2h, %d keys hold state; want 0", got)
	}

	// A Limit whose state was swept starts afresh, as if it had never been used.
	d, err := decide(m, ctx, []Check{{Limit: day, Cost: 10}}, t0.Add(2*time.Hour))
	if err != nil || !d.Allowed || d.Remaining[0] != 0 {
		t.Errorf("a swept window's decision = %+v, %v; want its whole quota", d, err)
	}
}

func TestANewLimitForAKnownKeyKeepsItsState(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	before := mustLimit(NewWindow("{p}:quota", LevelUser, Requests, 10, Calendar{Period: Day}))
	if _, err := decide(m, ctx, []Check{{Limit: before, Cost: 4}}, t0); err != nil {
		t.Fatal(err)
	}
	// A reloaded configuration raises the quota: the 4 already used still count.
	after := mustLimit(NewWindow("{p}:quota", LevelUser, Requests, 20, Calendar{Period: Day}))
	d, err := decide(m, ctx, []Check{{Limit: after, Cost: 1}}, t0)
	if err != nil || d.Remaining[0] != 15 {
		t.Errorf("remaining after a reload = %d, %v; want 15", d.Remaining[0], err)
	}
}

// BenchmarkMemoryBytesPerKey reports what one key with state costs the memory store: its cell
// and its map entry (the Limit and its key string belong to the configuration).
func BenchmarkMemoryBytesPerKey(b *testing.B) {
	const keys = 100_000
	var before, after runtime.MemStats
	for b.Loop() {
		limits := make([]*Limit, keys)
		for i := range limits {
			limits[i] = mustLimit(NewBucket(fmt.Sprintf("{openai}:user:acme:user-%06d:requests:minute", i), LevelUser, Requests, 60, time.Minute, 60))
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewMemory()
		for _, l := range limits {
			decide(m, context.Background(), []Check{{Limit: l, Cost: 1}}, t0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/keys, "bytes/key")
		runtime.KeepAlive(m)
		runtime.KeepAlive(limits)
	}
}

// TestMemoryRefundFillsABucketOnlyToNow refunds more than a bucket took, then decides on a clock
// that stepped back a second: the refund filled the bucket as of the refund's now, not earlier,
// so the full burst is a second away. (Redis drops a bucket that is full at now, and a clock
// that steps back finds it full; Memory keeps it, so only Memory has this floor to test.)
func TestMemoryRefundFillsABucketOnlyToNow(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	b := mustLimit(NewBucket("{p}:refunded", LevelUser, Requests, 1, time.Second, 2))
	if d, err := decide(m, ctx, []Check{{Limit: b, Cost: 1}}, t0); err != nil || !d.Allowed {
		t.Fatalf("first decision: %+v, %v", d, err)
	}
	if err := m.Settle(ctx, "refund", []Check{{Limit: b, Cost: -8}}, t0); err != nil {
		t.Fatal(err)
	}
	d, err := decide(m, ctx, []Check{{Limit: b, Cost: 2}}, t0.Add(-time.Second))
	if err != nil || d.Allowed || d.RetryAfter != time.Second || d.Remaining[0] != 1 {
		t.Errorf("the burst a second before the refund: %+v, %v; want refused for 1s with 1 left", d, err)
	}
}

// TestRateIsWhatABacklogPasses checks each kind's rate: a bucket's, a rolling window's capacity a
// period at slots/(slots+1), and none for a calendar window or calls in flight.
func TestRateIsWhatABacklogPasses(t *testing.T) {
	mustLimit := func(l *Limit, err error) *Limit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cases := []struct {
		limit *Limit
		want  float64
	}{
		{mustLimit(NewBucket("b", LevelUser, Requests, 2, time.Second, 5)), 2},
		{mustLimit(NewPace("p", LevelProvider, Tokens, 6000, time.Minute, 100, 6000)), 100},
		{mustLimit(NewRolling("r", LevelProvider, Tokens, 6100, time.Minute, 60)), 100},
		{mustLimit(NewWindow("w", LevelTenant, Tokens, 1000, Calendar{Period: Day, Location: time.UTC})), 0},
		{mustLimit(NewConcurrency("c", LevelProvider, 10, time.Minute)), 0},
	}
	for _, tc := range cases {
		if got := tc.limit.Rate(); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: Rate() = %v; want %v", tc.limit.Key, got, tc.want)
		}
	}
}
