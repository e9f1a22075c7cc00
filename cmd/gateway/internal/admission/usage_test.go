package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/redisserver"
)

// budgetedTenants returns n tenants, "t0" to "t<n-1>", each with a monthly budget of $100.
func budgetedTenants(n int) []gatewayv1.Tenant {
	out := make([]gatewayv1.Tenant, n)
	for i := range out {
		out[i] = tenant(fmt.Sprintf("t%d", i), "u")
		out[i].Budget = &gatewayv1.Budget{Amount: "100", Period: gatewayv1.PeriodMonth}
	}
	return out
}

// TestUsageReadsEveryBudget checks that a snapshot reports each budgeted tenant's spend and what
// is left from the store, and nothing of a budget for a tenant without one, on both stores.
func TestUsageReadsEveryBudget(t *testing.T) {
	for name, newStore := range limiterStores {
		t.Run(name, func(t *testing.T) {
			tenants := append(budgetedTenants(2), tenant("free", "u"))
			g, p := newGateOn(t, plan{requestsPerMinute: 100, tokensPerMinute: 100_000, maxInFlight: 10, tenants: tenants}, newStore(t))
			spend := ratelimit.Check{Limit: p.Tenants()[1].Budget(), Cost: 25_500_000}
			if err := g.opts.Limiter.Settle(context.Background(), "spend", []ratelimit.Check{spend}, time.Now()); err != nil {
				t.Fatal(err)
			}
			var got []budgetLine
			for _, tu := range g.Usage(context.Background()).Tenants {
				got = append(got, budgetLine{tu.Name, tu.SpendThisPeriod, tu.BudgetRemaining, tu.ResetsAt != nil})
			}
			want := []budgetLine{{"t0", "0", "100", true}, {"t1", "25.5", "74.5", true}, {"free", "0", "", false}} // free reports what it spent through this gateway
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tenants' budgets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueuesReadsNoStore checks that the queue snapshot reports what waits, per provider and
// tenant, without asking the store anything.
func TestQueuesReadsNoStore(t *testing.T) {
	store := &countingStore{Memory: ratelimit.NewMemory()}
	tenants := append(budgetedTenants(1), tenant("free", "u"))
	g, p := newGateOn(t, plan{requestsPerMinute: 100, tokensPerMinute: 100_000, maxInFlight: 10, tenants: tenants}, store)
	g.usage.queued(new(request(t, p, "sk-free-u", 800)), 2, 1600)
	want := []gatewayv1.QueueDepth{{Name: "lab", Queued: 2, QueuedTokens: 1600}, {Name: "t0"}, {Name: "free", Queued: 2, QueuedTokens: 1600}}
	q := g.Queues()
	if diff := cmp.Diff(want, append(q.Providers, q.Tenants...)); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if n := store.reads.Load(); n != 0 {
		t.Errorf("the queue snapshot asked the store %d times; want none", n)
	}
}

// countingStore is the memory store, counting the decisions and peeks asked of it.
type countingStore struct {
	*ratelimit.Memory
	reads atomic.Int32
}

func (s *countingStore) Decide(ctx context.Context, checks []ratelimit.Check, now time.Time, d *ratelimit.Decision) error {
	s.reads.Add(1)
	return s.Memory.Decide(ctx, checks, now, d)
}

func (s *countingStore) Peek(ctx context.Context, checks []ratelimit.Check, now time.Time) ([]ratelimit.Reading, error) {
	s.reads.Add(1)
	return s.Memory.Peek(ctx, checks, now)
}

// budgetLine is what a snapshot says of one tenant's budget.
type budgetLine struct {
	Tenant           string
	Spent, Remaining gatewayv1.Money
	Resets           bool
}

// BenchmarkUsageRedis measures one usage snapshot of a gateway whose 5,000 tenants each have a
// budget, read from a real Redis: the metrics adapter and the manager wait for it.
//
//	go test ./cmd/gateway/internal/admission -run '^$' -bench UsageRedis -benchtime 20x
func BenchmarkUsageRedis(b *testing.B) {
	limiter := ratelimit.NewRedis(redisserver.Start(b).Client(b))
	pl := plan{requestsPerMinute: 1000, tokensPerMinute: 1_000_000, maxInFlight: 10, tenants: budgetedTenants(5000)}
	p := pl.compile(b)
	g := New(Options{Limiter: limiter, Policy: func() *policy.Policy { return p }})
	b.Cleanup(g.Close)
	ctx := context.Background()
	for b.Loop() {
		if u := g.Usage(ctx); u.Tenants[len(u.Tenants)-1].BudgetRemaining == "" {
			b.Fatal("the last tenant's budget was not read")
		}
	}
}
