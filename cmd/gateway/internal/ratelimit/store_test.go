package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/test/redisserver"
)

// store is what the shared table drives: both stores answer the same way on the same fake time.
type store interface {
	Decide(ctx context.Context, checks []Check, now time.Time, d *Decision) error
	Settle(ctx context.Context, id string, checks []Check, now time.Time) error
	Renew(ctx context.Context, checks []Check, now time.Time) error
}

// t0 is 23:00 UTC, an hour before a day's window resets.
var t0 = time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)

// step is one call at t0+at: Decide, or Settle or Renew when settle or renew is set.
type step struct {
	at     time.Duration
	costs  []int64 // one per limit of the case
	settle bool
	// took is, for a settlement, when its decision was taken, after t0; nil settles as a
	// settlement whose decision is unknown.
	took  *time.Duration
	renew bool
	// lease names the step's concurrency lease; empty means "step-i" for step i.
	lease string
	// id names a settlement; empty means "settle-i" for step i.
	id   string
	want result
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

// limiterCase is a sequence of steps on a fresh store.
type limiterCase struct {
	name   string
	limits []*Limit
	steps  []step
}

// limiterCases hold what both stores do alike, rolling windows' included.
func limiterCases() []limiterCase {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	losAngeles, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		panic(err)
	}
	return append([]limiterCase{
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
			name:   "a pace lets a call past its burst when it is full, into debt for calls past its burst alone, and none past its largest",
			limits: []*Limit{mustLimit(NewPace("{p}:pace", LevelProvider, Tokens, 100, time.Second, 100, 1000))},
			steps: []step{
				{costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{90}}},
				// Past the burst: it waits until the bucket is full again, 10 units at 10ms each.
				{costs: []int64{500}, want: result{Refused: 0, RetryAfter: 100 * time.Millisecond, Remaining: []int64{90}}},
				{at: 100 * time.Millisecond, costs: []int64{500}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				// A call within the burst finds the pace empty, not 4s in debt: one unit is earned
				// back in 10ms.
				{at: 100 * time.Millisecond, costs: []int64{1}, want: result{Refused: 0, RetryAfter: 10 * time.Millisecond, Remaining: []int64{0}}},
				{at: 100 * time.Millisecond, costs: []int64{1001}, want: result{Refused: 0, Never: true, Remaining: []int64{0}}},
				// A call past the burst waits for the debt: 5s from the large call's start.
				{at: 100 * time.Millisecond, costs: []int64{200}, want: result{Refused: 0, RetryAfter: 5 * time.Second, Remaining: []int64{0}}},
				{at: 110 * time.Millisecond, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				// A refund of 300 takes 3s off the debt, and fills the pace for calls within its
				// burst.
				{at: 110 * time.Millisecond, costs: []int64{-300}, settle: true},
				{at: 110 * time.Millisecond, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{99}}},
				// Past the burst, the debt left: 5.1s, and 20ms of the two small calls, less 3s.
				{at: 110 * time.Millisecond, costs: []int64{200}, want: result{Refused: 0, RetryAfter: 2010 * time.Millisecond, Remaining: []int64{99}}},
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
			name: "a refusal by a level of another hash tag takes nothing from the others",
			limits: []*Limit{
				mustLimit(NewWindow("{tenant:acme}:user", LevelUser, Requests, 5, Calendar{Period: Day})),
				mustLimit(NewBucket("{sluice:global}:requests", LevelGlobal, Requests, 10, time.Second, 10)),
				mustLimit(NewBucket("{openai}:provider", LevelProvider, Requests, 1, time.Second, 1)),
			},
			steps: []step{
				{costs: []int64{1, 1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{4, 9, 0}}},
				{costs: []int64{1, 1, 1}, want: result{Refused: 2, RetryAfter: time.Second, Remaining: []int64{4, 9, 0}}},
				{costs: []int64{6, 1, 1}, want: result{Refused: 0, RetryAfter: time.Second, Never: true, Remaining: []int64{0, 9, 0}}},
				{at: time.Second, costs: []int64{1, 1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{3, 9, 0}}},
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
			name: "a provider's day of requests refuses at its limit and resets at midnight in Los Angeles",
			limits: []*Limit{
				mustLimit(NewWindow("{gemini}:provider:requests:day", LevelProvider, Requests, 2, Calendar{Period: Day, Location: losAngeles})),
				mustLimit(NewRolling("{gemini}:provider:outputTokens:minute", LevelProvider, OutputTokens, 1000, time.Minute, 60)),
			},
			steps: []step{
				// 23:00 UTC is 15:00 in Los Angeles: midnight there is nine hours away.
				{costs: []int64{1, 400}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1, 600}}},
				{costs: []int64{1, 400}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0, 200}}},
				{at: time.Hour, costs: []int64{1, 1}, want: result{Refused: 0, RetryAfter: 8 * time.Hour, Remaining: []int64{0, 1000}}},
				// Midnight UTC is no reset of Los Angeles's day.
				{at: time.Hour + time.Minute, costs: []int64{1, 1}, want: result{Refused: 0, RetryAfter: 8*time.Hour - time.Minute, Remaining: []int64{0, 1000}}},
				{at: 9 * time.Hour, costs: []int64{1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1, 999}}},
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
				{costs: []int64{-1}, settle: true, lease: "step-0"},
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name: "a plan's calls in flight and its provider's are taken together or not at all",
			limits: []*Limit{
				mustLimit(NewConcurrency("{tenant:acme}:user:alice:inflight", LevelUser, 2, time.Minute)),
				mustLimit(NewConcurrency("{tenant:acme}:tenant:inflight", LevelTenant, 1, time.Minute)),
				mustLimit(NewConcurrency("{openai}:provider:inflight", LevelProvider, 1, time.Minute)),
			},
			steps: []step{
				// Another tenant's call holds the provider's one slot.
				{costs: []int64{0, 0, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{2, 1, 0}}},
				// The provider refuses: the user's and the tenant's slots are not taken...
				{costs: []int64{1, 1, 1}, want: result{Refused: 2, Remaining: []int64{2, 1, 0}}},
				// ...as a call that needs no slot of the provider's shows, taking the tenant's one.
				{costs: []int64{1, 1, 0}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1, 0, 0}}},
				{costs: []int64{1, 1, 1}, want: result{Refused: 1, Remaining: []int64{1, 0, 0}}},
				{costs: []int64{0, 0, -1}, settle: true, lease: "step-0"},
				{costs: []int64{-1, -1, 0}, settle: true, lease: "step-2"},
				{costs: []int64{1, 1, 1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{1, 0, 0}}},
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
			name:   "a refund never takes a window below empty",
			limits: []*Limit{mustLimit(NewWindow("{p}:refunded", LevelUser, Requests, 3, Calendar{Period: Day}))},
			steps: []step{
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{2}}},
				{costs: []int64{-5}, settle: true},
				{costs: []int64{3}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, want: result{Refused: 0, RetryAfter: time.Hour, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a settlement too large to be real counts as four bursts",
			limits: []*Limit{mustLimit(NewBucket("{p}:huge", LevelProvider, Tokens, 10, time.Second, 10))},
			steps: []step{
				// Four bursts of 10 at 100ms a unit put the bucket 4s in debt: one unit more is 3.1s away.
				{costs: []int64{math.MaxInt64}, settle: true},
				{costs: []int64{1}, want: result{Refused: 0, RetryAfter: 3100 * time.Millisecond, Remaining: []int64{0}}},
				{costs: []int64{-math.MaxInt64}, settle: true},
				{costs: []int64{10}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
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
	}, rollingCases()...)
}

func runCases(t *testing.T, cases []limiterCase, newStore func(t *testing.T) store) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			for i, st := range tc.steps {
				runStep(t, s, tc.limits, i, st)
			}
		})
	}
}

// runStep runs step i on s and checks its decision.
func runStep(t *testing.T, s store, limits []*Limit, i int, st step) {
	t.Helper()
	ctx, now := context.Background(), t0.Add(st.at)
	lease, id := cmp.Or(st.lease, fmt.Sprint("step-", i)), cmp.Or(st.id, fmt.Sprint("settle-", i))
	checks := make([]Check, len(limits))
	for j, l := range limits {
		checks[j] = Check{Limit: l, Cost: st.costs[j], Lease: lease}
		if st.took != nil {
			checks[j].Took = t0.Add(*st.took)
		}
	}
	switch {
	case st.settle:
		if err := s.Settle(ctx, id, checks, now); err != nil {
			t.Fatalf("step %d: Settle: %v", i, err)
		}
	case st.renew:
		if err := s.Renew(ctx, checks, now); err != nil {
			t.Fatalf("step %d: Renew: %v", i, err)
		}
	default:
		d, err := decide(s, ctx, checks, now)
		if err != nil {
			t.Fatalf("step %d: Decide: %v", i, err)
		}
		got := result{Allowed: d.Allowed, Refused: d.Refused, RetryAfter: d.RetryAfter, Never: d.Never, Remaining: d.Remaining[:len(checks)]}
		if diff := gocmp.Diff(st.want, got); diff != "" {
			t.Errorf("step %d: decision (-want +got):\n%s", i, diff)
		}
		if !d.At.Equal(now) {
			t.Errorf("step %d: decision taken at %s; want the clock it was given, %s", i, d.At, now)
		}
	}
}

func TestMemory(t *testing.T) {
	runCases(t, limiterCases(), func(*testing.T) store { return NewMemory() })
}

func TestRedis(t *testing.T) {
	server := redisserver.Start(t)
	runCases(t, append(limiterCases(), redisCases()...), func(t *testing.T) store {
		client := server.Client(t)
		if err := client.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return NewRedis(client, WithCallerClock())
	})
}

// redisCases hold what only the Redis store does: leases that expire and are renewed, each
// counted once, and settlements applied once per id. (Memory counts calls in flight without
// naming them, and ignores settlement ids.)
func redisCases() []limiterCase {
	return []limiterCase{
		{
			name:   "a lease frees itself when its time to live ends",
			limits: []*Limit{mustLimit(NewConcurrency("{p}:expiring", LevelProvider, 1, time.Minute))},
			steps: []step{
				{costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: time.Minute - time.Microsecond, costs: []int64{1}, want: result{Refused: 0, Remaining: []int64{0}}},
				{at: time.Minute, costs: []int64{1}, want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a lease taken twice counts once, and released twice frees one slot",
			limits: []*Limit{mustLimit(NewConcurrency("{p}:twice", LevelProvider, 2, time.Minute))},
			steps: []step{
				{costs: []int64{1}, lease: "a", want: result{Allowed: true, Refused: -1, Remaining: []int64{1}}},
				// A decision reports what it has left as if its cost were new; a holds one slot still.
				{costs: []int64{1}, lease: "a", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, lease: "b", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{-1}, settle: true, lease: "a"},
				{costs: []int64{-1}, settle: true, lease: "a"},
				{costs: []int64{1}, lease: "c", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{1}, lease: "d", want: result{Refused: 0, Remaining: []int64{0}}},
			},
		},
		{
			name:   "a renewed lease outlives its first time to live, and one not renewed is freed",
			limits: []*Limit{mustLimit(NewConcurrency("{p}:renewed", LevelProvider, 2, time.Minute))},
			steps: []step{
				{costs: []int64{1}, lease: "a", want: result{Allowed: true, Refused: -1, Remaining: []int64{1}}},
				{costs: []int64{1}, lease: "b", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: 50 * time.Second, costs: []int64{1}, lease: "a", renew: true},
				// b has expired; a holds until 1m50s.
				{at: time.Minute, costs: []int64{1}, lease: "c", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: time.Minute, costs: []int64{1}, lease: "d", want: result{Refused: 0, Remaining: []int64{0}}},
				{at: 110 * time.Second, costs: []int64{1}, lease: "d", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name:   "renewing a lease released or expired does not take it again",
			limits: []*Limit{mustLimit(NewConcurrency("{p}:gone", LevelProvider, 1, time.Minute))},
			steps: []step{
				{costs: []int64{1}, lease: "a", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{costs: []int64{-1}, settle: true, lease: "a"},
				{costs: []int64{1}, lease: "a", renew: true},
				{costs: []int64{1}, lease: "b", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
				{at: time.Minute, costs: []int64{1}, lease: "b", renew: true},
				{at: time.Minute, costs: []int64{1}, lease: "c", want: result{Allowed: true, Refused: -1, Remaining: []int64{0}}},
			},
		},
		{
			name: "a settlement sent again with its id applies once",
			limits: []*Limit{
				mustLimit(NewWindow("{p}:settled-tokens", LevelTenant, Tokens, 10, Calendar{Period: Day})),
				mustLimit(NewConcurrency("{p}:settled-calls", LevelProvider, 2, time.Minute)),
			},
			steps: []step{
				{costs: []int64{4, 1}, lease: "a", want: result{Allowed: true, Refused: -1, Remaining: []int64{6, 1}}},
				{costs: []int64{4, 1}, lease: "b", want: result{Allowed: true, Refused: -1, Remaining: []int64{2, 0}}},
				{costs: []int64{-2, -1}, settle: true, lease: "a", id: "a"},
				{costs: []int64{-2, -1}, settle: true, lease: "a", id: "a"},
				{costs: []int64{0, 0}, lease: "probe", want: result{Allowed: true, Refused: -1, Remaining: []int64{4, 1}}},
				{costs: []int64{-2, -1}, settle: true, lease: "b", id: "b"},
				{costs: []int64{0, 0}, lease: "probe", want: result{Allowed: true, Refused: -1, Remaining: []int64{6, 2}}},
			},
		},
	}
}

// decide is s's decision on checks at now, into a Decision of its own.
func decide(s store, ctx context.Context, checks []Check, now time.Time) (Decision, error) {
	var d Decision
	err := s.Decide(ctx, checks, now, &d)
	return d, err
}
