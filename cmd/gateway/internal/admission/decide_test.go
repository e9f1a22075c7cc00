package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// downStore is a store that cannot be reached.
type downStore struct{}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (downStore) Decide(context.Context, []ratelimit.Check, time.Time, *ratelimit.Decision) error {
	return errDown
}
func (downStore) Settle(context.Context, string, []ratelimit.Check, time.Time) error { return errDown }
func (downStore) Renew(context.Context, []ratelimit.Check, time.Time) error          { return errDown }
func (downStore) Peek(context.Context, []ratelimit.Check, time.Time) ([]ratelimit.Reading, error) {
	return nil, errDown
}
func (downStore) Reseed(context.Context, *ratelimit.Limit, int64, []ratelimit.Seed, time.Time) (bool, error) {
	return false, errDown
}
func (downStore) Snapshot(context.Context, *ratelimit.Limit, int64, []*ratelimit.Limit, time.Time) (ratelimit.ScopeState, error) {
	return ratelimit.ScopeState{}, errDown
}

// TestFailOpenNeverDecidesWindowsLocally: with the store down and failing open, a call that a
// budget or a day's quota covers is refused as unavailable, and one that only rates cover is
// decided on the local shares.
func TestFailOpenNeverDecidesWindowsLocally(t *testing.T) {
	budgeted, quota, rates := tenant("budgeted", "alice"), tenant("quota", "bob"), tenant("rates", "carol")
	budgeted.Budget = &gatewayv1.Budget{Amount: "10.00", Period: gatewayv1.PeriodMonth}
	quota.PerUser = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 50, Per: gatewayv1.PeriodDay}}
	rates.PerUser = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 50, Per: gatewayv1.PeriodMinute}}
	p := plan{requestsPerMinute: 1000, tokensPerMinute: 1_000_000, maxInFlight: 10, tenants: []gatewayv1.Tenant{budgeted, quota, rates}}.compile(t)
	g := New(Options{Limiter: downStore{}, Fallback: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{}), Policy: func() *policy.Policy { return p }})
	t.Cleanup(g.Close)

	for _, tc := range []struct {
		key  string
		want Reason // the refusal's; zero means a ticket
	}{
		{key: "sk-budgeted-alice", want: Unavailable},
		{key: "sk-quota-bob", want: Unavailable},
		{key: "sk-rates-carol"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			ticket, refusal := g.Admit(context.Background(), request(t, p, tc.key, 100))
			switch {
			case tc.want == 0 && refusal != nil:
				t.Fatalf("Admit refused (reason %v); want a ticket decided locally", refusal.Reason)
			case tc.want == 0:
				ticket.Withdraw()
			case refusal == nil:
				ticket.Withdraw()
				t.Fatalf("Admit gave a ticket; want a refusal %v: a local window would start from full", tc.want)
			case refusal.Reason != tc.want || refusal.RetryAfter <= 0:
				t.Fatalf("Admit refused with %v, Retry-After %s; want %v with a Retry-After", refusal.Reason, refusal.RetryAfter, tc.want)
			}
		})
	}
}
