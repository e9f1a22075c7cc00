package usage

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// maxRefused is the most refusal reasons a status lists (the CRDs' MaxItems).
const maxRefused = 32

// GatewayReport is what the operator knows of one gateway: its last usage
// snapshot and whether the latest poll got an answer.
type GatewayReport struct {
	// Gateway names the gateway: its Pod, or its usage URL.
	Gateway string
	// Usage is the last snapshot the gateway served. Nil means it never
	// answered.
	Usage *gatewayv1.Usage
	// Err is why the latest poll got no answer. Nil means it did.
	Err error
}

// Totals is the gateways' usage, summed. The zero value means no gateway
// reported anything.
type Totals struct {
	// Providers hold each provider's usage by name.
	Providers map[string]v1alpha1.ProviderUsage
	// Tenants hold each tenant's usage by name.
	Tenants map[string]TenantTotals
	// Feedback holds what each provider's answers taught the gateways, by
	// name: only providers that reported limits lower than configured, or
	// that a gateway caps after a throttle. Nil means none did.
	Feedback map[string]ProviderFeedback
	// Oldest is when the oldest snapshot counted was taken. Zero means none
	// was.
	Oldest time.Time
	// Gateways counts the gateways polled.
	Gateways int
	// Unanswered say which gateways did not answer the latest poll, and why.
	// Their last snapshots are counted; a gateway that never answered is
	// not, and is never read as zero.
	Unanswered []string
	// Configs are the configurations the gateways that answered the latest
	// poll have in force: the SHA-256 each reported, by gateway. A gateway
	// that does not say is left out.
	Configs map[string]string
	// Record is the durable record of the calendar windows after the poll,
	// its scopes sorted by name; it must not be modified. Nil means the
	// poller keeps no record, or has not read it yet.
	Record *gatewayv1.Record
}

// ProviderFeedback is what one provider's answers taught the gateways.
type ProviderFeedback struct {
	// Learned are the lowest limits below the configured ones that the
	// provider reported to any gateway. A zero field means none lower.
	Learned gatewayv1.LearnedLimits
	// ThrottledInFlight sums the in-flight caps of the gateways that keep
	// one after the provider's throttles. Zero means none does.
	ThrottledInFlight int64
}

// TenantTotals is one tenant's usage, summed over the gateways.
type TenantTotals struct {
	// Queued counts the tenant's requests waiting now.
	Queued int64
	// Refused counts the tenant's refused requests, by reason.
	Refused map[string]int64
	// SpentMicros is what the tenant spent this period, in micro-dollars.
	SpentMicros int64
	// RemainingMicros is what is left of the tenant's budget this period,
	// in micro-dollars. Nil means no budget.
	RemainingMicros *int64
	// ResetsAt is when the budget's period ends. Zero means no budget.
	ResetsAt time.Time
}

// Sum adds up the gateways' reports. Traffic (requests, tokens, in
// flight, queued, refused, throttles), a provider's spend, the in-flight
// caps its throttles left and its breakers are each gateway's own, so they
// are summed (a breaker open or half open counts one); the
// limits a provider reported are its account's, so the lowest is taken. A tenant's budget lives in the limiter
// store the gateways share, so each gateway reports the same figures: the
// largest spend, the least left and the earliest reset are taken, not sums.
// A tenant without a budget reports what it spent through that gateway,
// which is summed.
func Sum(reports []GatewayReport) Totals {
	t := Totals{Providers: map[string]v1alpha1.ProviderUsage{}, Tenants: map[string]TenantTotals{}, Gateways: len(reports)}
	for _, r := range reports {
		if r.Err != nil {
			t.Unanswered = append(t.Unanswered, fmt.Sprintf("%s: %v", r.Gateway, r.Err))
		}
		if r.Usage == nil {
			continue
		}
		if r.Err == nil && r.Usage.ConfigSHA256 != "" {
			if t.Configs == nil {
				t.Configs = map[string]string{}
			}
			t.Configs[r.Gateway] = r.Usage.ConfigSHA256
		}
		if at := r.Usage.Time.Time; t.Oldest.IsZero() || at.Before(t.Oldest) {
			t.Oldest = at
		}
		for _, p := range r.Usage.Providers {
			t.Providers[p.Name] = addProvider(t.Providers[p.Name], p)
			if p.LearnedLimits != nil || p.ThrottledInFlight > 0 {
				if t.Feedback == nil {
					t.Feedback = map[string]ProviderFeedback{}
				}
				t.Feedback[p.Name] = addFeedback(t.Feedback[p.Name], p)
			}
		}
		for _, tu := range r.Usage.Tenants {
			t.Tenants[tu.Name] = addTenant(t.Tenants[tu.Name], tu)
		}
	}
	slices.Sort(t.Unanswered)
	return t
}

// Behind returns, sorted, the gateways that answered the latest poll with a
// configuration in force other than the one whose SHA-256 is config. None
// when config is empty (no configuration was written) or t is nil.
func (t *Totals) Behind(config string) []string {
	if t == nil || config == "" {
		return nil
	}
	var out []string
	for gateway, sum := range t.Configs {
		if sum != config {
			out = append(out, gateway)
		}
	}
	slices.Sort(out)
	return out
}

func addProvider(sum v1alpha1.ProviderUsage, p gatewayv1.ProviderUsage) v1alpha1.ProviderUsage {
	sum.RequestsLastMinute += p.RequestsLastMinute
	sum.TokensLastMinute += p.TokensLastMinute
	sum.InputTokensLastMinute += p.InputTokensLastMinute
	sum.OutputTokensLastMinute += p.OutputTokensLastMinute
	sum.InFlight += p.InFlight
	sum.Queued += p.Queued
	sum.QueuedTokens += p.QueuedTokens
	sum.Throttles += p.Throttles
	if p.Breaker == gatewayv1.BreakerOpen || p.Breaker == gatewayv1.BreakerHalfOpen {
		sum.BreakersOpen++
	}
	sum.BreakerOpens += p.BreakerOpens
	// Every gateway reports the batches of the store they share: the counts are not summed.
	sum.BatchesQueued, sum.BatchesRunning = max(sum.BatchesQueued, p.BatchesQueued), max(sum.BatchesRunning, p.BatchesRunning)
	sum.Refused = RefusedCounts(AddRefused(refusedMap(sum.Refused), p.Refused))
	spent := micros(gatewayv1.Money(sum.SpendThisMonth)) + micros(p.SpendThisMonth)
	sum.SpendThisMonth = v1alpha1.Money(gatewayv1.MoneyFromMicro(spent))
	return sum
}

// addFeedback takes the lowest limit learned, since every gateway calls the same account, and
// sums the caps, which are each gateway's own.
func addFeedback(sum ProviderFeedback, p gatewayv1.ProviderUsage) ProviderFeedback {
	if l := p.LearnedLimits; l != nil {
		sum.Learned = sum.Learned.Combine(*l, func(_ gatewayv1.Dimension, a, b int64) int64 { return lowestSet(a, b) })
	}
	sum.ThrottledInFlight += p.ThrottledInFlight
	return sum
}

// lowestSet is the lower of a and b, where zero is not set.
func lowestSet(a, b int64) int64 {
	if a == 0 || b == 0 {
		return max(a, b)
	}
	return min(a, b)
}

func addTenant(sum TenantTotals, tu gatewayv1.TenantUsage) TenantTotals {
	sum.Queued += tu.Queued
	sum.Refused = AddRefused(sum.Refused, tu.Refused)
	spent := micros(tu.SpendThisPeriod)
	if tu.BudgetRemaining == "" {
		if sum.RemainingMicros == nil {
			sum.SpentMicros += spent
		}
		return sum
	}
	left := micros(tu.BudgetRemaining)
	if sum.RemainingMicros == nil { // the first report from the shared store replaces local sums
		sum.SpentMicros, sum.RemainingMicros = spent, &left
	}
	sum.SpentMicros, *sum.RemainingMicros = max(sum.SpentMicros, spent), min(*sum.RemainingMicros, left)
	if at := tu.ResetsAt; at != nil && (sum.ResetsAt.IsZero() || at.Time.Before(sum.ResetsAt)) {
		sum.ResetsAt = at.Time
	}
	return sum
}

// micros reads a gateway's amount; the gateways write valid Money, and a
// malformed one counts as nothing rather than failing the whole sum.
func micros(m gatewayv1.Money) int64 {
	n, _ := m.MicroDollars()
	return n
}

// AddRefused adds more refusals, by reason, to sum and returns it; a nil sum
// is made when there is something to add.
func AddRefused(sum, more map[string]int64) map[string]int64 {
	if len(more) == 0 {
		return sum
	}
	if sum == nil {
		sum = map[string]int64{}
	}
	for reason, n := range more {
		sum[reason] += n
	}
	return sum
}

func refusedMap(counts []v1alpha1.RefusedCount) map[string]int64 {
	m := map[string]int64{}
	for _, c := range counts {
		m[c.Reason] = c.Count
	}
	return m
}

// RefusedCounts lists refusals by reason, keeping the most frequent when
// there are more than a status holds.
func RefusedCounts(m map[string]int64) []v1alpha1.RefusedCount {
	var out []v1alpha1.RefusedCount
	for _, reason := range slices.Sorted(maps.Keys(m)) {
		if m[reason] > 0 {
			out = append(out, v1alpha1.RefusedCount{Reason: reason, Count: m[reason]})
		}
	}
	slices.SortStableFunc(out, func(a, b v1alpha1.RefusedCount) int { return cmp.Compare(b.Count, a.Count) })
	if len(out) > maxRefused {
		out = out[:maxRefused]
	}
	slices.SortFunc(out, func(a, b v1alpha1.RefusedCount) int { return strings.Compare(a.Reason, b.Reason) })
	return out
}
