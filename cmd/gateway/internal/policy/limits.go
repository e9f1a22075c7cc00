package policy

import (
	"fmt"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// rule is one limit in its two forms: shared (in the configured store, the whole budget) and
// local (this replica's share, used only when Redis is unreachable and the store fails open).
type rule struct {
	shared, local *ratelimit.Limit
	// queue is true when a request this limit refuses waits in the queue (onLimit: Queue) rather
	// than being answered 429 at once.
	queue bool
}

// builder makes rules, keeping every (tenant, user) caller once.
type builder struct {
	replicas int64
	callers  map[string]*Caller
}

// The hash tags that start every limiter key (see the package doc). Names are DNS labels, so no
// provider's tag can be a tenant's or the global one.

// providerKey starts a key of a provider's own limits with the provider's hash tag.
func providerKey(provider, rest string) string { return "{" + provider + "}:" + rest }

// tenantKey starts a key of a tenant's limits (its users', its own, its budget, its endpoints')
// with the tenant's hash tag.
func tenantKey(tenant, rest string) string { return "{tenant:" + tenant + "}:" + rest }

// globalKey is the prefix of the global limits' keys, in a hash tag of their own.
const globalKey = "{sluice:global}"

// rules builds one level's limits under a key prefix; calendar windows reset in loc.
func (b *builder) rules(prefix string, level ratelimit.Level, limits []gatewayv1.Limit, loc *time.Location) ([]rule, error) {
	out := make([]rule, 0, len(limits))
	seen := map[string]int{}
	for _, l := range limits {
		key := limitKey(prefix, l)
		if seen[key]++; seen[key] > 1 {
			key = fmt.Sprintf("%s:%d", key, seen[key])
		}
		r, err := b.rule(key, level, l, loc)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// limitKey is the key of a limit under a level's prefix: its dimension and period, or "inflight"
// for calls in flight, as a provider's are named.
func limitKey(prefix string, l gatewayv1.Limit) string {
	if l.Dimension == gatewayv1.DimensionInFlight {
		return prefix + ":inflight"
	}
	return prefix + ":" + string(l.Dimension) + ":" + string(l.Per)
}

func (b *builder) rule(key string, level ratelimit.Level, l gatewayv1.Limit, loc *time.Location) (rule, error) {
	if l.Dimension == gatewayv1.DimensionInFlight {
		r, err := b.concurrency(key, level, l.Amount)
		r.queue = l.OnLimit == gatewayv1.BehaviorQueue
		return r, err
	}
	dim, amount, err := dimension(l)
	if err != nil {
		return rule{}, fmt.Errorf("policy: limit %s: %w", key, err)
	}
	if l.Per.IsCalendar() {
		cal := ratelimit.Calendar{Period: ratelimit.Day, Location: loc}
		if l.Per == gatewayv1.PeriodMonth {
			cal.Period = ratelimit.Month
		}
		r, err := b.pair(func(share func(int64) int64) (*ratelimit.Limit, error) {
			return ratelimit.NewWindow(key, level, dim, share(amount), cal)
		})
		r.queue = l.OnLimit == gatewayv1.BehaviorQueue
		return r, err
	}
	burst := amount
	if l.Burst > 0 {
		burst = l.Burst
	}
	r, err := b.bucket(key, level, dim, amount, l.Per.Duration(), burst)
	r.queue = l.OnLimit == gatewayv1.BehaviorQueue
	return r, err
}

func (b *builder) bucket(key string, level ratelimit.Level, dim ratelimit.Dimension, rate int64, per time.Duration, burst int64) (rule, error) {
	return b.pair(func(share func(int64) int64) (*ratelimit.Limit, error) {
		return ratelimit.NewBucket(key, level, dim, share(rate), per, share(burst))
	})
}

// concurrency is a limit of n calls in flight, held by leases that the calls' gateway renews
// (see LeaseTTL).
func (b *builder) concurrency(key string, level ratelimit.Level, n int64) (rule, error) {
	return b.pair(func(share func(int64) int64) (*ratelimit.Limit, error) {
		return ratelimit.NewConcurrency(key, level, share(n), LeaseTTL)
	})
}

// pair builds a limit for the whole budget and for one replica's share of it.
func (b *builder) pair(build func(share func(int64) int64) (*ratelimit.Limit, error)) (rule, error) {
	shared, err := build(func(n int64) int64 { return n })
	if err != nil {
		return rule{}, err
	}
	local, err := build(func(n int64) int64 { return max(n/b.replicas, 1) })
	if err != nil {
		return rule{}, err
	}
	return rule{shared: shared, local: local}, nil
}

// dimension maps a configured limit to what the limiter counts and how much it allows.
func dimension(l gatewayv1.Limit) (ratelimit.Dimension, int64, error) {
	if l.Dimension == gatewayv1.DimensionDollars {
		micros, err := l.Dollars.MicroDollars()
		return ratelimit.MicroDollars, micros, err
	}
	return counted(l.Dimension), l.Amount, nil
}

// counted is what the limiter counts for a dimension of requests or tokens.
func counted(d gatewayv1.Dimension) ratelimit.Dimension {
	switch d {
	case gatewayv1.DimensionTokens:
		return ratelimit.Tokens
	case gatewayv1.DimensionInputTokens:
		return ratelimit.InputTokens
	case gatewayv1.DimensionOutputTokens:
		return ratelimit.OutputTokens
	}
	return ratelimit.Requests
}

// providerRules builds a provider's own limits, published holding those on requests and tokens
// (see gatewayv1.Provider.PublishedLimits), each at its headroom share of the published one; a day
// resets in loc.
//
// A provider counts its per-minute limits on a rolling minute: no sixty seconds may hold more than
// the limit. The gateway counts them the same way, as rolling windows of a minute in slots of a
// second (see perMinute), each paced by a bucket (see pace): no rolling minute ever sees more than
// the limit, and a backlog drains at the pace, 59/61 of it. A day is a calendar window, shared
// through the store as a plan's day quota is.
func (b *builder) providerRules(p *gatewayv1.Provider, published []gatewayv1.Limit, loc *time.Location) ([]rule, error) {
	var out []rule
	add := func(r rule, err error) error {
		if err == nil {
			r.queue = true // a provider's own limits always queue: its capacity comes back
			out = append(out, r)
		}
		return err
	}
	// addPerMinute adds a per-minute limit n of dim, under key: its rolling minute, then its pace.
	addPerMinute := func(key string, dim ratelimit.Dimension, n, minBurst int64) error {
		if err := add(b.perMinute(key+":minute", dim, n)); err != nil {
			return err
		}
		return add(b.pace(key+":pace", dim, n, minBurst))
	}
	prefix := providerKey(p.Name, "provider")
	level := ratelimit.LevelProvider
	for _, l := range published {
		l.Amount = p.WithHeadroom(l.Amount)
		var err error
		if l.Per == gatewayv1.PeriodDay {
			err = add(b.rule(limitKey(prefix, l), level, l, loc))
		} else {
			err = addPerMinute(prefix+":"+string(l.Dimension), counted(l.Dimension), l.Amount, gatewayv1.ProviderMinBurst(l.Dimension))
		}
		if err != nil {
			return nil, err
		}
	}
	if n := p.WithHeadroom(p.MaxInFlight); n > 0 {
		if err := add(b.concurrency(prefix+":inflight", level, n)); err != nil {
			return nil, err
		}
	}
	if n, _ := p.SpendPerMinute.MicroDollars(); n > 0 { // validated already
		if err := addPerMinute(prefix+":microdollars", ratelimit.MicroDollars, n, 0); err != nil {
			return nil, err
		}
	}
	if !p.SpendPerMonth.IsZero() {
		// A month's spend cap rejects: nobody waits for the next month in a queue.
		perMonth := gatewayv1.Limit{Dimension: gatewayv1.DimensionDollars, Dollars: p.SpendPerMonth, Per: gatewayv1.PeriodMonth}
		r, err := b.rule(prefix+":microdollars:month", level, perMonth, time.UTC)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// perMinute is a provider's per-minute limit n as a rolling window of a minute in
// gatewayv1.ProviderMinuteSlots slots, each replica's fail-open share of it a rolling window too.
func (b *builder) perMinute(key string, dim ratelimit.Dimension, n int64) (rule, error) {
	return b.pair(func(share func(int64) int64) (*ratelimit.Limit, error) {
		return ratelimit.NewRolling(key, ratelimit.LevelProvider, dim, share(n), time.Minute, gatewayv1.ProviderMinuteSlots)
	})
}

// pace is the bucket that paces a provider's per-minute limit n beside its rolling minute (see
// gatewayv1.ProviderPace): without it, a quiet minute would let the whole limit go in its first
// second, and then nothing until that second left the minute, every minute again. A call larger
// than the pace's burst passes when the pace is full, so the largest call is the rolling
// minute's: the whole limit, as at the provider.
func (b *builder) pace(key string, dim ratelimit.Dimension, n, minBurst int64) (rule, error) {
	rate, burst := gatewayv1.ProviderPace(n, minBurst)
	return b.pair(func(share func(int64) int64) (*ratelimit.Limit, error) {
		return ratelimit.NewPace(key, ratelimit.LevelProvider, dim, share(rate), time.Minute, share(burst), share(n))
	})
}

// LeaseTTL is how long Redis holds a call's slot in flight unless the call's gateway renews it,
// which it does every third of LeaseTTL while the call runs: a dead gateway's slots come back
// within it.
const LeaseTTL = 30 * time.Second

// tenantRules builds a tenant's own, budget and endpoint limits: totals over every provider the
// tenant uses.
func (b *builder) tenantRules(t *Tenant) error {
	prefix := tenantKey(t.Name, "tenant")
	limits, err := b.rules(prefix, ratelimit.LevelTenant, t.Config.PerTenant, t.Location)
	if err != nil {
		return err
	}
	if budget := t.Config.Budget; budget != nil {
		r, err := b.rule(prefix+":budget", ratelimit.LevelTenant, budget.Limit(), t.Location)
		if err != nil {
			return err
		}
		limits = append(limits, r)
		t.budget = r.shared
	}
	t.limits = limits
	t.endpoints = map[gatewayv1.Endpoint][]rule{}
	for _, e := range t.Config.Endpoints {
		rules, err := b.rules(tenantKey(t.Name, "endpoint:"+string(e.Endpoint)), ratelimit.LevelEndpoint, e.Limits, t.Location)
		if err != nil {
			return err
		}
		t.endpoints[e.Endpoint] = rules
	}
	return nil
}

// caller returns the tenant's user, with the per-user limits: totals over every provider.
func (b *builder) caller(t *Tenant, user string) (*Caller, error) {
	id := t.Name + "\x00" + user
	if c, ok := b.callers[id]; ok {
		return c, nil
	}
	rules, err := b.rules(tenantKey(t.Name, "user:"+user), ratelimit.LevelUser, t.Config.PerUser, t.Location)
	if err != nil {
		return nil, err
	}
	c := &Caller{Tenant: t, User: user, limits: rules}
	if b.callers == nil {
		b.callers = map[string]*Caller{}
	}
	b.callers[id] = c
	return c, nil
}
