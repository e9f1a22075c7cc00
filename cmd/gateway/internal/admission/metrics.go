package admission

import (
	"github.com/prometheus/client_golang/prometheus"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// metrics are the gate's Prometheus series: decisions, refusals, the queues and what calls cost.
type metrics struct {
	refusals      *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	spend         *prometheus.CounterVec
	billed        *prometheus.CounterVec
	decisions     *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	storeUp       prometheus.Gauge
	reseeds       prometheus.Counter
	arrivals      *prometheus.CounterVec
	callDuration  *prometheus.HistogramVec
	queueDepth    *prometheus.GaugeVec
	queueTokens   *prometheus.GaugeVec
	queueWait     *prometheus.HistogramVec
	doorRefusals  *prometheus.CounterVec
	estimateRatio *prometheus.HistogramVec
	comebackError *prometheus.HistogramVec
	providerShare *prometheus.GaugeVec
	breakerOpen   *prometheus.GaugeVec
	breakerOpens  *prometheus.CounterVec

	// decidedShared and decidedLocal are decisions' series of each store, found once rather than
	// at every decision.
	decidedShared, decidedLocal prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_refusals_total", Help: "Requests refused by a limit, by level and dimension.",
		}, []string{"level", "dimension"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_tokens_total", Help: "Tokens, estimated before calls and actual after them.",
		}, []string{"tenant", "provider", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_spend_microdollars_total", Help: "Spend settled from providers' usage, in micro-dollars.",
		}, []string{"tenant", "provider"}),
		billed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_billed_tokens_total",
			Help: "Tokens settled from providers' usage, by the class each is billed at: input (plain text input), cached_input, cache_write, audio_input, output (reasoning included), audio_output; reasoning counts the output tokens the model reasoned with.",
		}, []string{"tenant", "provider", "class"}),
		decisions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_gateway_decision_seconds", Help: "Time to take one limiter decision, by store.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 4, 10),
		}, []string{"store"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_store_errors_total", Help: "Limiter store errors, by what the gateway did (refused or local).",
		}, []string{"action"}),
		reseeds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_gateway_store_reseeds_total",
			Help: "Scopes (a tenant's, a provider's or the global calendar windows) this gateway re-seeded from the durable record, having found the store without their mark or with an older one than the record: the store came back empty, or from an older snapshot.",
		}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_gateway_store_up", Help: "1 when the limiter store answered its last call, 0 when it failed.",
		}),
	}
	m.decidedShared, m.decidedLocal = m.decisions.WithLabelValues("shared"), m.decisions.WithLabelValues("local")
	m.addQueueMetrics()
	reg.MustRegister(m.refusals, m.tokens, m.spend, m.billed, m.decisions, m.storeErrors, m.storeUp, m.reseeds,
		m.arrivals, m.callDuration, m.queueDepth, m.queueTokens, m.queueWait, m.doorRefusals, m.estimateRatio, m.comebackError, m.providerShare,
		m.breakerOpen, m.breakerOpens)
	m.storeUp.Set(1)
	return m
}

// addQueueMetrics makes the queue's series. Arrivals and call durations give Little's law:
// calls in flight = rate(arrivals) × mean duration, so an operator sees why a queue grows.
func (m *metrics) addQueueMetrics() {
	m.arrivals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_gateway_arrivals_total", Help: "Calls that arrived for a provider (their rate is the arrival rate).",
	}, []string{"provider"})
	m.callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_gateway_call_duration_seconds", Help: "Time from sending a call upstream to settling it (the service time).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"provider"})
	m.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_gateway_queue_depth", Help: "Calls waiting, by provider, priority class and tenant.",
	}, []string{"provider", "priority", "tenant"})
	m.queueTokens = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_gateway_queue_tokens", Help: "Tokens of the calls waiting, as their provider counts them when it admits a call, by provider, priority class and tenant.",
	}, []string{"provider", "priority", "tenant"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_gateway_queue_wait_seconds", Help: "Time calls waited in the queue before they were decided.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"provider"})
	m.providerShare = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_gateway_provider_effective_share", Help: "The share of a provider's in-flight cap this replica uses: 1 until the provider throttles, halved at each throttle, regained call by call.",
	}, []string{"provider"})
	m.breakerOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_gateway_provider_breaker_open", Help: "1 while a provider's circuit breaker is open or half open (out of its models' pools but for probes), 0 while it is closed.",
	}, []string{"provider"})
	m.breakerOpens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_gateway_provider_breaker_opens_total", Help: "Times a provider's circuit breaker opened after attempts that failed in a row.",
	}, []string{"provider"})
	m.estimateRatio = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_gateway_queue_wait_estimate_ratio", Help: "A queued call's wait over the wait the door estimated when it entered: 1 is a true estimate.",
		Buckets: prometheus.ExponentialBucketsRange(0.125, 8, 19),
	}, []string{"provider"})
	m.comebackError = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_gateway_door_comeback_seconds", Help: "When a caller turned away at the door was let in, less when it was told to come back: negative, sooner.",
		Buckets: []float64{-60, -30, -10, -5, -2, -1, 0, 1, 2, 5, 10, 30, 60, 120, 300},
	}, []string{"provider"})
	m.doorRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_gateway_door_refusals_total", Help: "Calls turned away at the door because their estimated wait passed maxWait.",
	}, []string{"provider", "tenant"})
}

// countBilled counts the tokens a call was billed for, by class; a class of none is not counted.
func (m *metrics) countBilled(tenant, provider string, t gatewayv1.Tokens) {
	for _, c := range [...]struct {
		class string
		n     int64
	}{
		{"input", t.PlainPrompt()}, {"cached_input", t.CachedPrompt}, {"cache_write", t.CacheWrite}, {"audio_input", t.AudioPrompt},
		{"output", t.PlainCompletion()}, {"reasoning", t.Reasoning}, {"audio_output", t.AudioCompletion},
	} {
		if c.n > 0 {
			m.billed.WithLabelValues(tenant, provider, c.class).Add(float64(c.n))
		}
	}
}
