package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The defaults of fields whose zero value means "the default", as their
// comments say.
const (
	defaultMaxBodyBytes     = 20 << 20
	defaultReadHeaderTime   = 10 * time.Second
	defaultReadTimeout      = time.Minute
	defaultIdleTimeout      = 2 * time.Minute
	defaultWriteTimeout     = 15 * time.Second
	defaultStreamKeepalive  = 15 * time.Second
	defaultMaxHeaderBytes   = 64 << 10
	defaultMaxConnections   = 4096
	defaultReplicas         = 1
	defaultHeadroomPercent  = 100
	defaultOutputWeight     = 1
	defaultMaxTokens        = 256
	defaultMaxTokensParam   = MaxTokensParamCompletion
	defaultAdmissionCount   = AdmissionCountCharacters
	defaultMaxAttempts      = 3
	defaultBaseDelay        = 500 * time.Millisecond
	defaultMaxDelay         = 30 * time.Second
	defaultTimeout          = 60 * time.Second
	defaultStallTimeout     = 5 * time.Minute
	defaultCallTimeout      = 30 * time.Minute
	defaultBreakerFailures  = 5
	defaultBreakerOpenFor   = 30 * time.Second
	defaultWeight           = 1
	defaultTimeZone         = "UTC"
	defaultMaxWait          = 60 * time.Second
	defaultStoreType        = StoreMemory
	defaultFailMode         = FailClosed
	defaultPriority         = PriorityInteractive
	defaultRateBehavior     = BehaviorQueue
	defaultCalendarBehavior = BehaviorReject
	defaultJobAttempts      = 3
	defaultReclaimAfter     = time.Minute
	defaultResultTTL        = 24 * time.Hour
	defaultJobWorkers       = 8
	defaultMaxQueued        = 10000
	defaultJobBodyBytes     = 1 << 20
	defaultJobResultBytes   = 8 << 20
	defaultJobTenantBytes   = 256 << 20
	defaultBatchFileBytes   = 100 << 20
	defaultBatchFiles       = 500
	defaultBatchTenantBytes = 1 << 30
	defaultBatchLines       = 10000
	defaultBatchKeepFor     = 720 * time.Hour
	defaultValleyPercent    = 25
	defaultJobScope         = JobScopeTenant
	defaultProviderState    = ProviderStateKeep
	defaultOwnersFor        = 720 * time.Hour
	defaultFollowFor        = 24 * time.Hour
	defaultKeptReclaim      = 30 * time.Second
	defaultContextWindow    = 1 << 20
)

// Default fills every unset field that has a default, as documented on the
// field. It leaves set fields alone, so it is safe to call twice.
func (c *Config) Default() {
	c.Server.defaults()
	c.Store.defaults()
	c.Jobs.defaults()
	c.Batches.defaults()
	setDefaultDuration(&c.Kept.OwnersFor, defaultOwnersFor)
	setDefaultDuration(&c.Kept.FollowFor, defaultFollowFor)
	setDefaultDuration(&c.Kept.ReclaimAfter, defaultKeptReclaim)
	defaultLimits(c.Global)
	for i := range c.Providers {
		c.Providers[i].Default()
	}
	for i := range c.Plans {
		c.Plans[i].Default()
	}
	for i := range c.Tenants {
		c.Tenants[i].Default()
	}
}

func (s *Server) defaults() {
	setDefault(&s.MaxBodyBytes, defaultMaxBodyBytes)
	setDefaultDuration(&s.ReadHeaderTimeout, defaultReadHeaderTime)
	setDefaultDuration(&s.ReadTimeout, defaultReadTimeout)
	setDefaultDuration(&s.IdleTimeout, defaultIdleTimeout)
	setDefaultDuration(&s.WriteTimeout, defaultWriteTimeout)
	setDefaultDuration(&s.StreamKeepalive, defaultStreamKeepalive)
	setDefault(&s.MaxHeaderBytes, defaultMaxHeaderBytes)
	setDefault(&s.MaxConnections, defaultMaxConnections)
	if s.MaxConnections > 0 { // an invalid one is Validate's to report
		setDefault(&s.MaxInFlight, max(s.MaxConnections/2, 1))
	}
}

func (s *Store) defaults() {
	setDefault(&s.Type, defaultStoreType)
	if s.Redis != nil {
		setDefault(&s.Redis.FailMode, defaultFailMode)
		setDefault(&s.Redis.Replicas, defaultReplicas)
	}
}

func (j *Jobs) defaults() {
	setDefault(&j.MaxAttempts, defaultJobAttempts)
	setDefaultDuration(&j.ReclaimAfter, defaultReclaimAfter)
	setDefaultDuration(&j.ResultTTL, defaultResultTTL)
	setDefault(&j.Workers, defaultJobWorkers)
	setDefault(&j.MaxQueuedPerTenant, defaultMaxQueued)
	setDefault(&j.MaxBodyBytes, defaultJobBodyBytes)
	setDefault(&j.MaxResultBytes, defaultJobResultBytes)
	setDefault(&j.MaxBytesPerTenant, defaultJobTenantBytes)
}

func (b *Batches) defaults() {
	setDefault(&b.MaxFileBytes, defaultBatchFileBytes)
	setDefault(&b.MaxFilesPerTenant, defaultBatchFiles)
	setDefault(&b.MaxBytesPerTenant, defaultBatchTenantBytes)
	setDefault(&b.MaxLinesPerBatch, defaultBatchLines)
	setDefaultDuration(&b.KeepFor, defaultBatchKeepFor)
	setDefault(&b.ValleyPercent, defaultValleyPercent)
}

// Default fills every unset field of the provider and its models that has a
// default, as Config.Default does.
func (p *Provider) Default() {
	for i := range p.Models {
		setDefault(&p.Models[i].DefaultMaxTokens, defaultMaxTokens)
		setDefault(&p.Models[i].MaxTokensParam, defaultMaxTokensParam)
		setDefault(&p.Models[i].ContextWindow, defaultContextWindow)
		if p.Models[i].Prices != nil {
			p.Models[i].Prices.defaults()
		}
	}
	p.Prices.defaults()
	setDefault(&p.AdmissionCount, defaultAdmissionCount)
	setDefault(&p.Batches, BatchesQueue)
	setDefault(&p.API, APIOpenAI)
	if p.API == APIAnthropic {
		setDefault(&p.AnthropicVersion, DefaultAnthropicVersion)
	}
	setDefault(&p.HeadroomPercent, defaultHeadroomPercent)
	setDefault(&p.TimeZone, defaultTimeZone)
	setDefault(&p.OutputTokenWeight, defaultOutputWeight)
	setDefault(&p.Retry.MaxAttempts, defaultMaxAttempts)
	setDefaultDuration(&p.Retry.BaseDelay, defaultBaseDelay)
	setDefaultDuration(&p.Retry.MaxDelay, defaultMaxDelay)
	setDefaultDuration(&p.Timeout, defaultTimeout)
	setDefaultDuration(&p.StallTimeout, defaultStallTimeout)
	setDefaultDuration(&p.CallTimeout, defaultCallTimeout)
	setDefault(&p.Breaker.Failures, defaultBreakerFailures)
	setDefaultDuration(&p.Breaker.OpenFor, defaultBreakerOpenFor)
}

// defaults sets each price of p left empty to the one it falls back to (see
// Prices and TierPrices), its tiers' included.
func (p *Prices) defaults() {
	standard := p.classes()
	standard.defaults(nil)
	for i := range p.Tiers {
		p.Tiers[i].classes().defaults(&standard)
	}
}

// defaults sets each price of c left empty to the one it falls back to: the
// input and output prices to those of standard, unless it is nil, then each
// other class's to c's own input or output price. A price falls back only
// to a valid one: an invalid one is Validate's to report, once.
func (c classPrices) defaults(standard *classPrices) {
	if standard != nil {
		setValidMoney(c[classInput], *standard[classInput])
		setValidMoney(c[classOutput], *standard[classOutput])
	}
	for k, to := range fallback {
		setValidMoney(c[k], *c[to])
	}
}

// setValidMoney sets an empty *m to def, when def is valid.
func setValidMoney(m *Money, def Money) {
	if _, err := def.MicroDollars(); err == nil {
		setDefault(m, def)
	}
}

// Default fills every unset field of the tenant and its limits that has a
// default, as Config.Default does. A tenant that names a plan is left alone:
// its terms are its plan's, defaulted with the plan.
func (t *Tenant) Default() {
	if t.Plan != "" {
		return
	}
	setDefault(&t.Priority, defaultPriority)
	setDefault(&t.Weight, defaultWeight)
	setDefault(&t.TimeZone, defaultTimeZone)
	setDefaultDuration(&t.MaxWait, defaultMaxWait)
	setDefault(&t.JobScope, defaultJobScope)
	setDefault(&t.ProviderState, defaultProviderState)
	defaultLimits(t.PerUser)
	defaultLimits(t.PerTenant)
	for i := range t.Endpoints {
		defaultLimits(t.Endpoints[i].Limits)
	}
}

func defaultLimits(limits []Limit) {
	for i := range limits {
		limits[i].defaults()
	}
}

// defaults sets a rate's burst to its amount and the behavior by the kind of
// period. A dollars limit keeps burst 0: its bucket holds the dollars
// amount; so does an inFlight limit, which has no bucket, and queues as a
// rate does.
func (l *Limit) defaults() {
	if l.Per.IsCalendar() {
		setDefault(&l.OnLimit, defaultCalendarBehavior)
		return
	}
	setDefault(&l.OnLimit, defaultRateBehavior)
	if l.Dimension != DimensionDollars && l.Dimension != DimensionInFlight {
		setDefault(&l.Burst, l.Amount)
	}
}

// setDefault sets *v to def if *v is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func setDefaultDuration(d *metav1.Duration, def time.Duration) {
	setDefault(&d.Duration, def)
}
