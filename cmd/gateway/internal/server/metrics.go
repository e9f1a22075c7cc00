package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus series of the HTTP side: answers, providers' errors and
// attempts, and jobs. The limits' and the queues' series are the admission gate's.
type metrics struct {
	requests       *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	// providerOverloaded counts Anthropic's 529s apart from the other errors.
	providerOverloaded *prometheus.CounterVec
	failovers          *prometheus.CounterVec
	jobsEnded          *prometheus.CounterVec
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
	reg.MustRegister(m.requests, m.providerErrors, m.providerOverloaded, m.attempts, m.failovers, m.jobsEnded, m.jobAttempts, m.jobsLost, m.overloaded, m.usageOutOfBounds, m.backgroundEnded, m.maxInFlight,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_gateway_calls_in_flight", Help: "Calls the API holds: being read, waiting in a queue, at their provider or streaming back.",
		}, inFlight))
	return m
}
