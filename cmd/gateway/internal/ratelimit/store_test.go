package ratelimit

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/test/redisserver"
)

// store is what the shared table drives: both stores answer the same way on the same fake time.
type store interface {
	Decide(ctx context.Context, checks []Check, now time.Time) (Decision, error)
	Settle(ctx context.Context, checks []Check, now time.Time) error
}

// t0 is 23:00 UTC, an hour before a day's window resets.
var t0 = time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)

// step is one call at t0+at: Decide, or Settle when settle is set.
type step struct {
	at     time.Duration
	costs  []int64 // one per limit of the case
	settle bool
	// release names the earlier step whose concurrency lease a settle step gives back.
	release int
	want    result
}

// result is the part of a Decision a step checks.
type result struct {
	Allowed    bool
	Refused    int
	RetryAfter time.Duration
	Never      bool
	Remaining  []int64
}

func mustLimit(l *Limit, err error) *Limit {
	if err != nil {
		panic(err)
	}
	return l
}

func limiterCases() []struct {
	name   string
	limits []*Limit
	steps  []step
} {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	return []struct {
		name   string
		limits []*Limit
		steps  []step
	}{
		{
			name:   "bucket allows its burst then says when the next unit is earned",
			limits: []*Limit{mustLimit(NewBucket("{p}:u", LevelUser, Requests, 2, time.Second, 2))},
			steps: []step{
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1}}},
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, want: result{Refused: 0, RetryAfter: 500 * time.Millisecond, Remaining: []int64{0}}},
				{at: 500 * time.Millisecond, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "variable cost waits for the tokens it needs, and a cost over the burst never passes",
			limits: []*Limit{mustLimit(NewBucket("{p}:t", LevelTenant, Tokens, 100, time.Second, 100))},
			steps: []step{
				{costs: []int64{60}, want: result{Allowed: true, Refused: -1, Remaining: []int64{40}}},
				{costs: []int64{60}, want: result{Refused: 0, RetryAfter: 200 * time.Millisecond, Remaining: []int64{40}}},
				{costs: []int64{101}, want: result{Refused: 0, Never: true, Remaining: []int64{0}}},
				{costs: []int64{math.MaxInt64}, want: result{Refused: 0, Never: true, Remaining: []int64{0}}},
				{at: 200 * time.Millisecond, costs: []int64{60}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name: "a refusal at one level takes nothing from the others",
			limits: []*Limit{
				mustLimit(NewBucket("{p}:user", LevelUser, Requests, 10, time.Second, 10)),
				mustLimit(NewBucket("{p}:provider", LevelProvider, Requests, 1, time.Second, 1)),
			},
			steps: []step{
				{costs: []int64{1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{9, 0}}},
				{costs: []int64{1, 1}, want: result{Refused: 1, RetryAfter: time.Second, Remaining: []int64{9, 0}}},
				{at: time.Second, costs: []int64{1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{9, 0}}},
			},
		},
		{
			name:   "a day's quota resets at midnight UTC",
			limits: []*Limit{mustLimit(NewWindow("{p}:day", LevelUser, Requests, 3, Calendar{Period: Day}))},
			steps: []step{
				{costs: []int64{3}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: 59 * time.Minute, costs: []int64{1}, want: result{Refused: 0, RetryAfter: time.Minute, Remaining: []int64{0}}},
				{at: time.Hour, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{2}}},
			},
		},
		{
			name:   "a day's quota resets at midnight in the plan's time zone",
			limits: []*Limit{mustLimit(NewWindow("{p}:ny", LevelUser, Requests, 1, Calendar{Period: Day, Location: newYork}))},
			steps: []step{
				// 23:00 UTC is 18:00 in New York: midnight there is six hours away.
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: time.Hour, costs: []int64{1}, want: result{Refused: 0, RetryAfter: 5 * time.Hour, Remaining: []int64{0}}},
				{at: 6 * time.Hour, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a month's budget resets on the first",
			limits: []*Limit{mustLimit(NewWindow("{p}:month", LevelTenant, MicroDollars, 5_000_000, Calendar{Period: Month}))},
			steps: []step{
				{costs: []int64{4_000_000}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1_000_000}}},
				{costs: []int64{2_000_000}, want: result{Refused: 0, RetryAfter: time.Hour, Remaining: []int64{1_000_000}}},
				{at: time.Hour, costs: []int64{2_000_000}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3_000_000}}},
			},
		},
		{
			name:   "calls in flight pass again when one is released",
			limits: []*Limit{mustLimit(NewConcurrency("{p}:inflight", LevelProvider, 2, time.Minute))},
			steps: []step{
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1}}},
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, want: result{Refused: 0, Remaining: []int64{0}}},
				{costs: []int64{-1}, settle: true, release: 0},
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "settling refunds an overestimate and charges an underestimate",
			limits: []*Limit{mustLimit(NewBucket("{p}:tokens", LevelProvider, Tokens, 100, time.Second, 100))},
			steps: []step{
				{costs: []int64{80}, want: result{Allowed: true, Refused: -1, Remaining: []int64{20}}},
				{costs: []int64{-50}, settle: true},
				{costs: []int64{60}, want: result{Allowed: true, Refused: -1, Remaining: []int64{10}}},
				{costs: []int64{40}, settle: true},
				{costs: []int64{10}, want: result{Refused: 0, RetryAfter: 400 * time.Millisecond, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a clock that steps back never gives more than the burst",
			limits: []*Limit{mustLimit(NewBucket("{p}:back", LevelGlobal, Requests, 1, time.Second, 1))},
			steps: []step{
				{at: time.Second, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, want: result{Refused: 0, RetryAfter: 2 * time.Second, Remaining: []int64{0}}},
			},
		},
	}
}

func runCases(t *testing.T, newStore func(t *testing.T) store) {
	ctx := context.Background()
	for _, tc := range limiterCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			for i, st := range tc.steps {
				lease := fmt.Sprint("step-", i)
				if st.settle {
					lease = fmt.Sprint("step-", st.release)
				}
				checks := make([]Check, len(tc.limits))
				for j, l := range tc.limits {
					checks[j] = Check{Limit: l, Cost: st.costs[j], Lease: lease}
				}
				if st.settle {
					if err := s.Settle(ctx, checks, t0.Add(st.at)); err != nil {
						t.Fatalf("step %d: Settle: %v", i, err)
					}
					continue
				}
				d, err := s.Decide(ctx, checks, t0.Add(st.at))
				if err != nil {
					t.Fatalf("step %d: Decide: %v", i, err)
				}
				got := result{Allowed: d.Allowed, Refused: d.Refused, RetryAfter: d.RetryAfter, Never: d.Never, Remaining: d.Remaining[:len(checks)]}
				if diff := cmp.Diff(st.want, got); diff != "" {
					t.Errorf("step %d: decision (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestMemory(t *testing.T) {
	runCases(t, func(*testing.T) store { return NewMemory() })
}

func TestRedis(t *testing.T) {
	server := redisserver.Start(t)
	runCases(t, func(t *testing.T) store {
		client := server.Client(t)
		if err := client.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return NewRedis(client, WithCallerClock())
	})
}
