package admission

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// usage counts this replica's traffic per provider and per tenant, for the usage snapshot and
// for the dispatchers' in-flight caps: the one count of calls in flight. It is safe for
// concurrent use.
type usage struct {
	mu        sync.Mutex
	providers map[string]*meter
	tenants   map[string]*meter
}

// meter is one provider's or tenant's traffic.
type meter struct {
	requests, tokens lastMinute
	input, output    lastMinute // tokens of each kind, of tokens
	inFlight         int64
	queued           int64
	queuedTokens     int64
	refused          map[string]int64
	throttles        int64
	spend            int64     // micro-dollars since the spend period began
	spendEnd         time.Time // when the spend period ends
}

// lastMinute sums what was added in the last 60 seconds, in one-second slots.
type lastMinute struct {
	second [60]int64
	count  [60]int64
}

func (l *lastMinute) add(now time.Time, n int64) {
	sec := now.Unix()
	i := sec % 60
	if l.second[i] != sec {
		l.second[i], l.count[i] = sec, 0
	}
	l.count[i] += n
}

func (l *lastMinute) sum(now time.Time) int64 { return l.sumWithin(now, time.Minute) }

// sumWithin sums what was added in the last window, in whole seconds, at most a minute.
func (l *lastMinute) sumWithin(now time.Time, window time.Duration) int64 {
	var total int64
	for i, sec := range l.second {
		if now.Unix()-sec < int64(window/time.Second) {
			total += l.count[i]
		}
	}
	return total
}

// sumWhere sums what was added in the whole seconds of the last window (the current one left
// out) in which marks has something, and counts those seconds.
func (l *lastMinute) sumWhere(now time.Time, window time.Duration, marks *lastMinute) (total int64, seconds int) {
	current := now.Unix()
	for i, sec := range marks.second {
		if age := current - sec; age > 0 && age <= int64(window/time.Second) && marks.count[i] > 0 {
			seconds++
			if l.second[i] == sec {
				total += l.count[i]
			}
		}
	}
	return total, seconds
}

func newUsage() *usage {
	return &usage{providers: map[string]*meter{}, tenants: map[string]*meter{}}
}

// meters returns the request's provider and tenant meters. The caller holds u.mu.
func (u *usage) meters(req *Request) [2]*meter {
	return [2]*meter{get(u.providers, req.provider()), get(u.tenants, req.tenant())}
}

func get(m map[string]*meter, name string) *meter {
	if m[name] == nil {
		m[name] = &meter{refused: map[string]int64{}}
	}
	return m[name]
}

// started counts a call let go at now, at its estimate: as its provider counts it on the
// provider's meter, as it is on its tenant's.
func (u *usage) started(req *Request, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, m := range u.meters(req) {
		m.requests.add(now, 1)
		m.addTokens(now, metered(req, i, req.Cost), 1)
		m.inFlight++
	}
}

// finished counts a call that ended at now, at its actual cost in place of its estimate.
func (u *usage) finished(req *Request, actual policy.Cost, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, m := range u.meters(req) {
		m.addTokens(now, metered(req, i, actual), 1)
		m.addTokens(now, metered(req, i, req.Cost), -1)
		m.inFlight--
		if !now.Before(m.spendEnd) {
			m.spend, m.spendEnd = 0, spendPeriodEnd(req.Caller.Tenant, i == 1, now)
		}
		m.spend += actual.MicroDollars
	}
}

// metered is cost c of req as meter i of its meters counts it: as its provider counts it (see
// policy.Provider.Counted) on the provider's, the first, as it is on its tenant's.
func metered(req *Request, i int, c policy.Cost) policy.Cost {
	if i == 0 {
		return req.Route.Provider.Counted(c)
	}
	return c
}

// addTokens adds sign times the tokens of c, of each kind, at now.
func (m *meter) addTokens(now time.Time, c policy.Cost, sign int64) {
	m.tokens.add(now, sign*c.Tokens)
	m.input.add(now, sign*c.InputTokens)
	m.output.add(now, sign*c.OutputTokens)
}

// inFlight is this replica's calls in flight to a provider.
func (u *usage) inFlight(provider string) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m := u.providers[provider]; m != nil {
		return m.inFlight
	}
	return 0
}

// spendPeriodEnd is when spend restarts: a provider's month in UTC, a tenant's budget period in
// its time zone (a month without a budget).
func spendPeriodEnd(t *policy.Tenant, tenant bool, now time.Time) time.Time {
	cal := ratelimit.Calendar{Period: ratelimit.Month}
	if tenant {
		cal.Location = t.Location
		if b := t.Config.Budget; b != nil && b.Period == gatewayv1.PeriodDay {
			cal.Period = ratelimit.Day
		}
	}
	_, end := cal.Bounds(now)
	return end
}

// queued counts requests and their estimated tokens into (positive) or out of (negative) the
// queue.
func (u *usage) queued(req *Request, requests, tokens int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range u.meters(req) {
		m.queued += requests
		m.queuedTokens += tokens
	}
}

// refused counts a refusal, under its reason (level_dimension).
func (u *usage) refused(req *Request, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range u.meters(req) {
		m.refused[reason]++
	}
}

func (u *usage) throttled(provider string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	get(u.providers, provider).throttles++
}

func (m *meter) traffic(now time.Time) gatewayv1.Traffic {
	refused := make(map[string]int64, len(m.refused))
	for k, v := range m.refused {
		refused[k] = v
	}
	return gatewayv1.Traffic{
		RequestsLastMinute: m.requests.sum(now), TokensLastMinute: m.tokens.sum(now),
		InputTokensLastMinute: m.input.sum(now), OutputTokensLastMinute: m.output.sum(now),
		InFlight: m.inFlight, Queued: m.queued, QueuedTokens: m.queuedTokens, Refused: refused,
	}
}

// spendNow is the spend of the period that holds now.
func (m *meter) spendNow(now time.Time) int64 {
	if now.Before(m.spendEnd) {
		return m.spend
	}
	return 0
}

// Usage returns this replica's usage under the configuration in force. A tenant with a budget
// reports its spend and what is left from the limiter's store, which every replica shares.
func (g *Gate) Usage(ctx context.Context) gatewayv1.Usage {
	p, now := g.policy(), g.now()
	out := g.usage.snapshot(p, now)
	g.budgetUsage(ctx, p, out.Tenants, now)
	g.feedbackUsage(out.Providers)
	return out
}

// feedbackUsage fills each provider's limits learned from its answers, the in-flight cap its
// throttles left and its breaker. A provider that was never called taught nothing.
func (g *Gate) feedbackUsage(providers []gatewayv1.ProviderUsage) {
	for i := range providers {
		d, ok := g.dispatchers.Load(providers[i].Name)
		if !ok {
			continue
		}
		l := d.(*dispatcher).health.feedbackNow()
		providers[i].ThrottledInFlight = l.inFlight
		providers[i].Breaker, providers[i].BreakerOpens = l.breaker, l.opens
		if !l.learned.IsZero() {
			providers[i].LearnedLimits = &l.learned
		}
	}
}

// Queues returns what waits in this replica's queues now, per provider and tenant of the
// configuration in force. It reads nothing from the limiter's store.
func (g *Gate) Queues() gatewayv1.Queues {
	return g.usage.queues(g.policy(), g.now())
}

func (u *usage) queues(p *policy.Policy, now time.Time) gatewayv1.Queues {
	out := gatewayv1.Queues{Time: metav1.NewTime(now)}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, pr := range p.Providers() {
		out.Providers = append(out.Providers, get(u.providers, pr.Name).depth(pr.Name))
	}
	for _, t := range p.Tenants() {
		out.Tenants = append(out.Tenants, get(u.tenants, t.Name).depth(t.Name))
	}
	return out
}

func (m *meter) depth(name string) gatewayv1.QueueDepth {
	return gatewayv1.QueueDepth{Name: name, Queued: m.queued, QueuedTokens: m.queuedTokens}
}

func (u *usage) snapshot(p *policy.Policy, now time.Time) gatewayv1.Usage {
	out := gatewayv1.Usage{Time: metav1.NewTime(now)}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, pr := range p.Providers() {
		m := get(u.providers, pr.Name)
		out.Providers = append(out.Providers, gatewayv1.ProviderUsage{
			Name: pr.Name, Traffic: m.traffic(now), Throttles: m.throttles,
			SpendThisMonth: gatewayv1.MoneyFromMicro(m.spendNow(now)),
		})
	}
	for _, t := range p.Tenants() {
		m := get(u.tenants, t.Name)
		out.Tenants = append(out.Tenants, gatewayv1.TenantUsage{
			Name: t.Name, Traffic: m.traffic(now), SpendThisPeriod: gatewayv1.MoneyFromMicro(m.spendNow(now)),
		})
	}
	return out
}

// budgetUsage fills each tenant's budget left and spend from the store: every tenant's one
// budget, spent by calls to all its providers, is read in one peek, which takes nothing. If the
// store cannot answer, each tenant keeps the spend this replica counted.
func (g *Gate) budgetUsage(ctx context.Context, p *policy.Policy, tenants []gatewayv1.TenantUsage, now time.Time) {
	var budgets []*ratelimit.Limit
	var of []int // the index in tenants of each budget's tenant
	for i, t := range p.Tenants() {
		if b := t.Budget(); b != nil {
			budgets, of = append(budgets, b), append(of, i)
		}
	}
	readings, err := g.opts.Limiter.Peek(ctx, ratelimit.Reads(budgets...), now)
	if err != nil {
		return
	}
	for j, r := range readings {
		at := metav1.NewTime(now.Add(r.Reset))
		tu := &tenants[of[j]]
		tu.BudgetRemaining, tu.SpendThisPeriod, tu.ResetsAt = gatewayv1.MoneyFromMicro(r.Remaining), gatewayv1.MoneyFromMicro(budgets[j].Capacity()-r.Remaining), &at
	}
}

// Record reads every scope of the configuration in force from the store, for the durable record
// (see gatewayv1.Record): each as current when its mark held at least the version versions names
// for it (0 when none), and then moved on by one. A scope whose mark is missing, or older than the
// version of the gateway's own record, is re-seeded from that record first, so that a store that
// came back empty is put back at the next poll, whether or not a call came meanwhile.
func (g *Gate) Record(ctx context.Context, versions map[string]int64) (gatewayv1.Record, error) {
	scopes := g.policy().Scopes()
	out := gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind, Scopes: make([]gatewayv1.ScopeRecord, len(scopes))}
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(recordReaders)
	for i, s := range scopes {
		group.Go(func() error {
			st, err := g.readScope(ctx, s, versions[s.Name])
			out.Scopes[i] = s.Recorded(st)
			return err
		})
	}
	return out, group.Wait()
}

// recordReaders is how many scopes Record reads at once.
const recordReaders = 16

// readScope reads one scope for the record, re-seeding it first when its mark is behind the
// gateway's record.
func (g *Gate) readScope(ctx context.Context, s *policy.Scope, version int64) (ratelimit.ScopeState, error) {
	st, err := g.opts.Limiter.Snapshot(ctx, s.Mark, version, s.Windows, g.now())
	if err != nil || st.Version >= s.Record.Version {
		return st, err
	}
	if err := g.reseed(ctx, s); err != nil {
		return st, err
	}
	return g.opts.Limiter.Snapshot(ctx, s.Mark, version, s.Windows, g.now())
}
