package server

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus series of the HTTP side: answers, providers' errors and
// attempts, jobs, and the OpenTelemetry GenAI conventions' client metrics under their Prometheus
// names. The limits' and the queues' series are the admission gate's.
type metrics struct {
	requests       *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	// providerOverloaded counts Anthropic's 529s apart from the other errors.
	providerOverloaded *prometheus.CounterVec
	failovers          *prometheus.CounterVec
	jobsEnded          *prometheus.CounterVec
	batchLines         *prometheus.CounterVec
	jobAttempts        *prometheus.CounterVec
	jobsLost           prometheus.Counter
	overloaded         *prometheus.CounterVec
	// usageOutOfBounds counts calls whose usage was more than they could have used.
	usageOutOfBounds *prometheus.CounterVec
	// backgroundEnded counts the background responses followed to their end.
	backgroundEnded *prometheus.CounterVec
	// maxInFlight is each provider's cap on calls in flight, across every gateway, beside which
	// Little's law puts what its traffic needs: rate(arrivals) × mean call duration.
	maxInFlight *prometheus.GaugeVec
	// genAITokens, genAIDuration and genAIFirstChunk are the GenAI conventions' client metrics of
	// the calls that went to a provider (see observeGenAI).
	genAITokens     *prometheus.HistogramVec
	genAIDuration   *prometheus.HistogramVec
	genAIFirstChunk *prometheus.HistogramVec
}

// The labels of the GenAI metrics, as the conventions' attributes become Prometheus labels.
var genAILabels = []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}

// The buckets the GenAI conventions give their histograms.
var (
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

func newGenAIMetrics(m *metrics) {
	m.genAITokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gen_ai_client_token_usage", Buckets: genAITokenBuckets,
		Help: "Tokens a call that went to a provider was charged, input or output (OpenTelemetry's gen_ai.client.token.usage), by operation, provider and the model sent.",
	}, slices.Concat(genAILabels, []string{"gen_ai_token_type"}))
	m.genAIDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gen_ai_client_operation_duration_seconds", Buckets: genAIDurationBuckets,
		Help: "Time from a call's going to its provider (the last, after a failover) to its end, retries included (OpenTelemetry's gen_ai.client.operation.duration), by operation, provider, the model sent and error_type, the outcome of a call that did not end ok.",
	}, slices.Concat(genAILabels, []string{"error_type"}))
	m.genAIFirstChunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gen_ai_client_operation_time_to_first_chunk_seconds", Buckets: genAIDurationBuckets,
		Help: "Time from a stream's going to its provider to its first data chunk (OpenTelemetry's gen_ai.client.operation.time_to_first_chunk), by operation, provider and the model sent.",
	}, genAILabels)
}

// observeGenAI observes the GenAI metrics of call c, which ended as e at now: the calls that went
// to a provider, their duration, a stream's first chunk, and the tokens of those charged their
// usage.
func (m *metrics) observeGenAI(c *call, e ending, now time.Time) {
	if c.sent.IsZero() {
		return
	}
	op, provider := operationName(c.endpoint), c.provider()
	errorType := ""
	if e.outcome != outcomeOK {
		errorType = e.outcome
	}
	m.genAIDuration.WithLabelValues(op, provider, c.modelSent, errorType).Observe(now.Sub(c.sent).Seconds())
	if !c.firstChunk.IsZero() {
		m.genAIFirstChunk.WithLabelValues(op, provider, c.modelSent).Observe(c.firstChunk.Sub(c.sent).Seconds())
	}
	if e.ticket == settleTicket {
		m.genAITokens.WithLabelValues(op, provider, c.modelSent, "input").Observe(float64(e.usage.PromptTokens))
		m.genAITokens.WithLabelValues(op, provider, c.modelSent, "output").Observe(float64(e.usage.CompletionTokens))
	}
}

// The outcomes a request is counted under.
const (
	outcomeOK            = "ok"
	outcomeRefused       = "refused"
	outcomeBadRequest    = "bad_request"
	outcomeUnauthorized  = "unauthorized"
	outcomeForbidden     = "forbidden"
	outcomeProviderError = "provider_error"
	outcomeUnreachable   = "provider_unreachable"
	outcomeStoreDown     = "store_unavailable"
	outcomeClientClosed  = "client_closed"
	outcomeClientTooSlow = "client_too_slow"
	outcomeInternalError = "internal_error"
	outcomeOverloaded    = "overloaded"
)

// newMetrics registers the series; inFlight reads the calls the API holds.
func newMetrics(reg prometheus.Registerer, inFlight func() float64) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_requests_total", Help: "Requests answered, by tenant, provider and outcome.",
		}, []string{"tenant", "provider", "outcome"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_provider_errors_total", Help: "Error answers and failed connections from providers, by HTTP status (0: no answer).",
		}, []string{"provider", "status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_upstream_attempts_total", Help: "Attempts sent to providers, retries included, by answer status (0: no answer).",
		}, []string{"provider", "status"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_failovers_total", Help: "Calls a provider failed before any of its answer reached the client, sent again to another provider of the model's pool, by the provider that failed them.",
		}, []string{"provider"}),
		jobsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_jobs_ended_total", Help: "Jobs that ended, by tenant and state: succeeded, failed (after their attempts) or cancelled.",
		}, []string{"tenant", "state"}),
		batchLines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_batch_lines_total", Help: "Lines of batches that ended, by tenant and outcome: completed, failed, expired (not run within the completion window) or cancelled (their batch was).",
		}, []string{"tenant", "outcome"}),
		jobAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_job_attempts_total", Help: "Attempts of jobs, by tenant and result: ok, failed, or deferred (refused by the job's own limits, not counted as an attempt).",
		}, []string{"tenant", "result"}),
		jobsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_gateway_jobs_lost_total",
			Help: "Jobs accepted, then lost with the jobs' store when it came back empty, that this gateway noticed: polled or cancelled here (answered 410 job_lost), or running here. Each is counted once per gateway that notices it.",
		}),
		overloaded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_overloaded_total", Help: "Calls answered 503 server_overloaded because the gateway held server.maxInFlight calls already, or their tenant its share of them, by tenant (empty: no known key).",
		}, []string{"tenant"}),
		usageOutOfBounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_usage_out_of_bounds_total",
			Help: "Calls whose usage, as the provider reported it or as a stream was counted, was more than the call could have used (more prompt tokens than its body's bytes and images, or completion tokens than its cap times n), settled at the bound instead, by provider.",
		}, []string{"provider"}),
		backgroundEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_background_responses_ended_total",
			Help: "Background responses followed to their end, by tenant, provider and outcome: settled (at the usage the provider reported), bound (charged their bound: deleted, or past kept.followFor) or lost (the settlement failed; the estimate stays charged).",
		}, []string{"tenant", "provider", "outcome"}),
		maxInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_gateway_provider_max_in_flight",
			Help: "A provider's cap on calls in flight across every gateway (its maxInFlight, less headroom); absent for a provider without one. Compare with rate(arrivals) × mean call duration, the calls in flight its traffic needs.",
		}, []string{"provider"}),
	}
	m.providerOverloaded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_gateway_provider_overloaded_total",
		Help: "Attempts an Anthropic provider answered 529 overloaded_error, retries included, by provider: its capacity spent for the moment, which neither pauses the provider's queue nor lowers its limits, as a 429 does.",
	}, []string{"provider"})
	newGenAIMetrics(m)
	reg.MustRegister(m.requests, m.providerErrors, m.providerOverloaded, m.attempts, m.failovers, m.jobsEnded, m.batchLines, m.jobAttempts, m.jobsLost, m.overloaded, m.usageOutOfBounds, m.backgroundEnded, m.maxInFlight,
		m.genAITokens, m.genAIDuration, m.genAIFirstChunk,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_gateway_calls_in_flight", Help: "Calls the API holds: being read, waiting in a queue, at their provider or streaming back.",
		}, inFlight))
	return m
}
