package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus series.
type metrics struct {
	requests       *prometheus.CounterVec
	refusals       *prometheus.CounterVec
	tokens         *prometheus.CounterVec
	spend          *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	decisions      *prometheus.HistogramVec
	storeErrors    *prometheus.CounterVec
	storeUp        prometheus.Gauge
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
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_requests_total", Help: "Requests answered, by tenant, provider and outcome.",
		}, []string{"tenant", "provider", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_refusals_total", Help: "Requests refused by a limit, by level and dimension.",
		}, []string{"level", "dimension"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_tokens_total", Help: "Tokens, estimated before calls and actual after them.",
		}, []string{"tenant", "provider", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_spend_microdollars_total", Help: "Spend settled from providers' usage, in micro-dollars.",
		}, []string{"tenant", "provider"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_provider_errors_total", Help: "Error answers and failed connections from providers, by HTTP status (0: no answer).",
		}, []string{"provider", "status"}),
		decisions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_gateway_decision_seconds", Help: "Time to take one limiter decision, by store.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 4, 10),
		}, []string{"store"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_gateway_store_errors_total", Help: "Limiter store errors, by what the gateway did (refused or local).",
		}, []string{"action"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_gateway_store_up", Help: "1 when the limiter store answered its last call, 0 when it failed.",
		}),
	}
	reg.MustRegister(m.requests, m.refusals, m.tokens, m.spend, m.providerErrors, m.decisions, m.storeErrors, m.storeUp)
	m.storeUp.Set(1)
	return m
}
