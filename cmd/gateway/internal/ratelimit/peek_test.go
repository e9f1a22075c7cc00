package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/test/redisserver"
)

// peeker is a store that reads limits without taking from them.
type peeker interface {
	store
	Peek(ctx context.Context, checks []Check, now time.Time) ([]Reading, error)
}

// testPeek takes from a bucket, a window, a concurrency limit and a pace under two hash tags,
// peeks at them and at a key never used, and checks that the readings say what a decision would,
// and that peeking took nothing. The pace took a call past its burst, less a refund: in debt for
// calls past its burst, it holds what is left of the refund for calls within it.
func testPeek(t *testing.T, s peeker) {
	ctx := context.Background()
	bucket := mustLimit(NewBucket("{a}:bucket", LevelTenant, Tokens, 100, time.Second, 100))
	window := mustLimit(NewWindow("{b}:budget", LevelTenant, MicroDollars, 5_000_000, Calendar{Period: Day}))
	slots := mustLimit(NewConcurrency("{a}:slots", LevelProvider, 3, time.Minute))
	unused := mustLimit(NewWindow("{c}:budget", LevelTenant, MicroDollars, 7, Calendar{Period: Month}))
	pace := mustLimit(NewPace("{a}:pace", LevelProvider, Tokens, 100, time.Second, 100, 1000))
	checks := []Check{{Limit: bucket, Cost: 40}, {Limit: window, Cost: 1_500_000}, {Limit: slots, Cost: 1, Lease: "call"}, {Limit: pace, Cost: 150}}
	if d, err := decide(s, ctx, checks, t0); err != nil || !d.Allowed {
		t.Fatalf("Decide: %+v, %v; want allowed", d, err)
	}
	if err := s.Settle(ctx, "refund", []Check{{Limit: pace, Cost: -50}}, t0); err != nil {
		t.Fatal(err)
	}
	limits := []*Limit{bucket, window, slots, unused, pace}
	want := []Reading{
		{Remaining: 60, Reset: 400 * time.Millisecond},
		{Remaining: 3_500_000, Reset: time.Hour},
		{Remaining: 2},
		{Remaining: 7, Reset: time.Hour}, // t0 is an hour before the month ends
		{Remaining: 50, Reset: time.Second},
	}
	for i := range 2 {
		got, err := s.Peek(ctx, Reads(limits...), t0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("peek %d (-want +got):\n%s", i, diff)
		}
	}
	one, err := s.Peek(ctx, Reads(limits[1]), t0)
	if err != nil || len(one) != 1 || one[0] != want[1] {
		t.Errorf("Peek of the window alone = %v, %v; want %v", one, err, want[1:2])
	}
	// For a cost: the bucket holds 100 in 400ms; the pace lets a call past its burst through
	// when it is full, one within it when it holds it.
	costly := []Check{{Limit: bucket, Cost: 100}, {Limit: pace, Cost: 500}, {Limit: pace, Cost: 80}, {Limit: pace, Cost: 1001}}
	waits := []time.Duration{400 * time.Millisecond, time.Second, 300 * time.Millisecond, 0}
	got, err := s.Peek(ctx, costly, t0)
	for i, w := range waits {
		if err != nil || got[i].Wait != w {
			t.Errorf("Peek for %d on %s = %v, %v; want a wait of %s", costly[i].Cost, costly[i].Limit.Key, got, err, w)
		}
	}
}

func TestMemoryPeek(t *testing.T) {
	m := NewMemory()
	testPeek(t, m)
	if got := m.Len(); got != 4 {
		t.Errorf("the memory store holds %d keys after the peeks; want the 4 decided", got)
	}
}

func TestRedisPeek(t *testing.T) {
	testPeek(t, NewRedis(redisserver.Start(t).Client(t), WithCallerClock()))
}

// BenchmarkPeekRedis reads 5,000 windows, as a usage snapshot reads 5,000 tenants' budgets: under
// one hash tag (one script run), and each under its own (a script run each, as on Redis Cluster).
func BenchmarkPeekRedis(b *testing.B) {
	client := redisserver.Start(b).Client(b)
	for _, keys := range []string{"{p}:tenant:%d:budget", "{tenant:%d}:budget"} {
		b.Run("keys="+keys, func(b *testing.B) {
			r, ctx, now := NewRedis(client), context.Background(), time.Now()
			limits := make([]*Limit, 5000)
			for i := range limits {
				limits[i] = mustLimit(NewWindow(fmt.Sprintf(keys, i), LevelTenant, MicroDollars, 100_000_000, Calendar{Period: Month}))
				if _, err := decide(r, ctx, []Check{{Limit: limits[i], Cost: int64(i)}}, now); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := r.Peek(ctx, Reads(limits...), now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
