package controllers

import (
	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// providerLimitField is a field of a ProviderQuota's limits on requests or tokens, and the limit
// of the gateway's provider it holds.
type providerLimitField struct {
	name      string
	dimension gatewayv1.Dimension
	per       gatewayv1.Period
	// listed is true for a limit the gateway's provider holds in its list of limits, false for
	// requestsPerMinute and tokensPerMinute, which it holds in fields of their own.
	listed bool
	// words name the limit in a condition's message.
	words string
	of    func(*v1alpha1.ProviderLimits) *int64
}

// providerLimitFields are the fields of a ProviderQuota's limits on requests and tokens, in the
// order of the gateway's provider's list of limits.
var providerLimitFields = []providerLimitField{
	{"requestsPerMinute", gatewayv1.DimensionRequests, gatewayv1.PeriodMinute, false, "requests per minute",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.RequestsPerMinute }},
	{"tokensPerMinute", gatewayv1.DimensionTokens, gatewayv1.PeriodMinute, false, "tokens per minute",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.TokensPerMinute }},
	{"inputTokensPerMinute", gatewayv1.DimensionInputTokens, gatewayv1.PeriodMinute, true, "input tokens per minute",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.InputTokensPerMinute }},
	{"outputTokensPerMinute", gatewayv1.DimensionOutputTokens, gatewayv1.PeriodMinute, true, "output tokens per minute",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.OutputTokensPerMinute }},
	{"requestsPerDay", gatewayv1.DimensionRequests, gatewayv1.PeriodDay, true, "requests per day",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.RequestsPerDay }},
	{"tokensPerDay", gatewayv1.DimensionTokens, gatewayv1.PeriodDay, true, "tokens per day",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.TokensPerDay }},
	{"inputTokensPerDay", gatewayv1.DimensionInputTokens, gatewayv1.PeriodDay, true, "input tokens per day",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.InputTokensPerDay }},
	{"outputTokensPerDay", gatewayv1.DimensionOutputTokens, gatewayv1.PeriodDay, true, "output tokens per day",
		func(l *v1alpha1.ProviderLimits) *int64 { return &l.OutputTokensPerDay }},
}

// limitField returns the field of a ProviderQuota's limits that holds a limit of d per period;
// false for a limit none holds, which no provider that validates has.
func limitField(d gatewayv1.Dimension, per gatewayv1.Period) (providerLimitField, bool) {
	for _, f := range providerLimitFields {
		if f.dimension == d && f.per == per {
			return f, true
		}
	}
	return providerLimitField{}, false
}

// providerLimits are a ProviderQuota's limits as the gateway's provider lists them: those set
// that it holds in no field of its own.
func providerLimits(l *v1alpha1.ProviderLimits) []gatewayv1.Limit {
	var out []gatewayv1.Limit
	for _, f := range providerLimitFields {
		if n := *f.of(l); n > 0 && f.listed {
			out = append(out, gatewayv1.Limit{Dimension: f.dimension, Amount: n, Per: f.per})
		}
	}
	return out
}

// effectiveLimits are the limits the gateways enforce on p, after headroom.
func effectiveLimits(p *gatewayv1.Provider) *v1alpha1.ProviderLimits {
	out := &v1alpha1.ProviderLimits{MaxInFlight: p.WithHeadroom(p.MaxInFlight)}
	for _, l := range p.PublishedLimits() {
		if f, ok := limitField(l.Dimension, l.Per); ok {
			*f.of(out) = p.WithHeadroom(l.Amount)
		}
	}
	return out
}

// learnedLimits are the limits a provider reported lower than its spec's, as status shows them,
// or nil for none.
func learnedLimits(l gatewayv1.LearnedLimits) *v1alpha1.ProviderLimits {
	if l.IsZero() {
		return nil
	}
	out := &v1alpha1.ProviderLimits{}
	for _, f := range learnedFields() {
		*f.of(out) = l.Of(f.dimension)
	}
	return out
}

// learnedFields are the fields of a ProviderQuota's limits that a provider's answers may lower:
// those per minute.
func learnedFields() []providerLimitField {
	var out []providerLimitField
	for _, f := range providerLimitFields {
		if f.per == gatewayv1.PeriodMinute {
			out = append(out, f)
		}
	}
	return out
}
