package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Usage is the snapshot one gateway serves at GET /admin/usage: what each
// provider and tenant used lately, as the operator writes into status and
// the metrics adapter reads for the queues.
type Usage struct {
	// gateway identifies the gateway replica that took the snapshot.
	Gateway string `json:"gateway"`
	// time is when the snapshot was taken.
	Time metav1.Time `json:"time"`
	// configSHA256 is the lower-case hex SHA-256 of the configuration file
	// the gateway has in force, so that the operator knows which gateways
	// have loaded the configuration it wrote. Empty means the gateway does
	// not say.
	ConfigSHA256 string `json:"configSHA256,omitempty"`
	// providers hold one entry per configured provider.
	Providers []ProviderUsage `json:"providers,omitempty"`
	// tenants hold one entry per configured tenant.
	Tenants []TenantUsage `json:"tenants,omitempty"`
}

// Traffic counts the requests of one provider or one tenant through one
// gateway. Its fields appear inline in ProviderUsage and TenantUsage, so
// that the snapshots of several gateways add up the same way for both.
type Traffic struct {
	// requestsLastMinute counts requests sent to a provider in the last
	// minute.
	RequestsLastMinute int64 `json:"requestsLastMinute"`
	// tokensLastMinute counts tokens charged in the last minute: for a
	// provider, as it counts them (see Provider.cachedInputCounts and
	// outputTokenWeight).
	TokensLastMinute int64 `json:"tokensLastMinute"`
	// inputTokensLastMinute counts input tokens charged in the last minute,
	// for a provider as it counts them.
	InputTokensLastMinute int64 `json:"inputTokensLastMinute,omitempty"`
	// outputTokensLastMinute counts output tokens charged in the last
	// minute (a call's cap while it runs, its completion once it ends), for
	// a provider as it counts them.
	OutputTokensLastMinute int64 `json:"outputTokensLastMinute,omitempty"`
	// inFlight counts calls waiting for a provider's answer now.
	InFlight int64 `json:"inFlight"`
	// queued counts requests waiting in the gateway now.
	Queued int64 `json:"queued"`
	// queuedTokens is the estimated tokens of the requests waiting in the
	// gateway now.
	QueuedTokens int64 `json:"queuedTokens"`
	// refused counts requests the gateway refused, by reason.
	Refused map[string]int64 `json:"refused,omitempty"`
}

// ProviderUsage is one provider's recent usage through one gateway.
type ProviderUsage struct {
	// name is the provider's name in the configuration.
	Name string `json:"name"`
	Traffic
	// throttles counts 429 and 503 answers from the provider.
	Throttles int64 `json:"throttles"`
	// spendThisMonth is what calls cost this calendar month (UTC).
	SpendThisMonth Money `json:"spendThisMonth,omitempty"`
	// learnedLimits are the limits the provider last reported to this
	// gateway, in its x-ratelimit-limit-requests and -tokens headers or
	// Anthropic's anthropic-ratelimit-*-limit, where they are lower than the
	// configured ones. The gateway paces to them
	// (after headroom) in place of the configured ones. Nil means the
	// provider reported none lower.
	LearnedLimits *LearnedLimits `json:"learnedLimits,omitempty"`
	// throttledInFlight is the cap of calls in flight this gateway keeps to
	// the provider while it recovers from a 429 or 503: halved at each
	// throttle, grown back at each success. Zero means no cap of the
	// throttles' own is in force.
	ThrottledInFlight int64 `json:"throttledInFlight,omitempty"`
	// breaker is the state of this gateway's circuit breaker for the
	// provider (see Breaker): "Closed", calls go; "Open", it is out of its
	// models' pools after failures in a row; "HalfOpen", one call probes it.
	// Empty means Closed.
	Breaker BreakerState `json:"breaker,omitempty"`
	// breakerOpens counts the times the breaker opened.
	BreakerOpens int64 `json:"breakerOpens,omitempty"`
	// batchesQueued counts the batches of the provider's models waiting to
	// run (on its batch service, for room in its enqueued tokens), and
	// batchesRunning those running, in the gateways' queue or on its batch
	// service: the store's counts, which every gateway sharing it reports
	// alike.
	BatchesQueued  int64 `json:"batchesQueued,omitempty"`
	BatchesRunning int64 `json:"batchesRunning,omitempty"`
}

// BreakerState is the state of a provider's circuit breaker.
type BreakerState string

// The states of a breaker.
const (
	BreakerClosed   BreakerState = "Closed"
	BreakerOpen     BreakerState = "Open"
	BreakerHalfOpen BreakerState = "HalfOpen"
)

// LearnedLimits are a provider's limits as it reports them in its answers'
// headers: the published account limits, before the gateway's headroom.
type LearnedLimits struct {
	// requestsPerMinute is x-ratelimit-limit-requests, or
	// anthropic-ratelimit-requests-limit. Zero means it reported none lower
	// than configured.
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// tokensPerMinute is x-ratelimit-limit-tokens. Zero means it reported
	// none lower than configured.
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`
	// inputTokensPerMinute is anthropic-ratelimit-input-tokens-limit. Zero
	// means it reported none lower than configured.
	InputTokensPerMinute int64 `json:"inputTokensPerMinute,omitempty"`
	// outputTokensPerMinute is anthropic-ratelimit-output-tokens-limit.
	// Zero means it reported none lower than configured.
	OutputTokensPerMinute int64 `json:"outputTokensPerMinute,omitempty"`
}

// IsZero reports whether l holds no limit.
func (l LearnedLimits) IsZero() bool { return l == LearnedLimits{} }

// Of returns l's limit of d per minute, zero for none.
func (l LearnedLimits) Of(d Dimension) int64 {
	switch d {
	case DimensionRequests:
		return l.RequestsPerMinute
	case DimensionTokens:
		return l.TokensPerMinute
	case DimensionInputTokens:
		return l.InputTokensPerMinute
	case DimensionOutputTokens:
		return l.OutputTokensPerMinute
	}
	return 0
}

// LearnedDimensions returns the dimensions whose limit per minute a
// provider's answers may teach, in the order of LearnedLimits' fields.
func LearnedDimensions() []Dimension {
	return []Dimension{DimensionRequests, DimensionTokens, DimensionInputTokens, DimensionOutputTokens}
}

// Combine returns the limits f makes of each limit of l and the same limit
// of o, one dimension at a time.
func (l LearnedLimits) Combine(o LearnedLimits, f func(d Dimension, mine, other int64) int64) LearnedLimits {
	return LearnedLimits{
		RequestsPerMinute:     f(DimensionRequests, l.RequestsPerMinute, o.RequestsPerMinute),
		TokensPerMinute:       f(DimensionTokens, l.TokensPerMinute, o.TokensPerMinute),
		InputTokensPerMinute:  f(DimensionInputTokens, l.InputTokensPerMinute, o.InputTokensPerMinute),
		OutputTokensPerMinute: f(DimensionOutputTokens, l.OutputTokensPerMinute, o.OutputTokensPerMinute),
	}
}

// TenantUsage is one tenant's recent usage through one gateway.
type TenantUsage struct {
	// name is the tenant's name in the configuration.
	Name string `json:"name"`
	Traffic
	// spendThisPeriod is what the tenant spent in its budget's current
	// period, or this calendar month (UTC) when it has no budget.
	SpendThisPeriod Money `json:"spendThisPeriod,omitempty"`
	// budgetRemaining is what is left of the budget this period. Empty means
	// the tenant has no budget.
	BudgetRemaining Money `json:"budgetRemaining,omitempty"`
	// resetsAt is when the budget's period ends. Nil means no budget.
	ResetsAt *metav1.Time `json:"resetsAt,omitempty"`
}

// Queues is the snapshot one gateway serves at GET /admin/queues: what
// waits in its queues now, per provider and tenant. It reads nothing from
// the limiter's store, so that the metrics adapter may poll it every few
// seconds. Its JSON reads as a Usage whose entries hold only their names
// and queue counts.
type Queues struct {
	// gateway identifies the gateway replica that took the snapshot.
	Gateway string `json:"gateway"`
	// time is when the snapshot was taken.
	Time metav1.Time `json:"time"`
	// providers hold one entry per configured provider.
	Providers []QueueDepth `json:"providers,omitempty"`
	// tenants hold one entry per configured tenant.
	Tenants []QueueDepth `json:"tenants,omitempty"`
}

// QueueDepth is what waits for one provider or one tenant in one gateway.
type QueueDepth struct {
	// name is the provider's or the tenant's name in the configuration.
	Name string `json:"name"`
	// queued counts requests waiting in the gateway now.
	Queued int64 `json:"queued"`
	// queuedTokens is the estimated tokens of the requests waiting now.
	QueuedTokens int64 `json:"queuedTokens"`
}
