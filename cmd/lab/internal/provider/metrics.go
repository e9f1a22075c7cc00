package provider

import "github.com/prometheus/client_golang/prometheus"

// statMetric is one metric read from Stats at each scrape.
type statMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	label string // the value of the metric's one label, if it has one
	value func(Stats) int64
}

var (
	callsDesc  = prometheus.NewDesc("lab_provider_calls_total", "Calls the provider decided about, by outcome.", []string{"outcome"}, nil)
	tokensDesc = prometheus.NewDesc("lab_provider_tokens_total", "Tokens of the calls served, by kind.", []string{"kind"}, nil)
)

// statMetrics are the provider's metrics: the same numbers as /stats.
var statMetrics = []statMetric{
	{callsDesc, prometheus.CounterValue, "accepted", func(s Stats) int64 { return s.Accepted }},
	{callsDesc, prometheus.CounterValue, "rejected_requests", func(s Stats) int64 { return s.Rejected429Requests }},
	{callsDesc, prometheus.CounterValue, "rejected_tokens", func(s Stats) int64 { return s.Rejected429Tokens }},
	{callsDesc, prometheus.CounterValue, "overloaded", func(s Stats) int64 { return s.Rejected503 }},
	{prometheus.NewDesc("lab_provider_calls_canceled_total", "Admitted calls whose client left before the answer.", nil, nil),
		prometheus.CounterValue, "", func(s Stats) int64 { return s.Canceled }},
	{prometheus.NewDesc("lab_provider_in_flight", "Calls running now.", nil, nil),
		prometheus.GaugeValue, "", func(s Stats) int64 { return s.InFlight }},
	{prometheus.NewDesc("lab_provider_in_flight_max", "The most calls that ran at once.", nil, nil),
		prometheus.GaugeValue, "", func(s Stats) int64 { return s.MaxInFlightSeen }},
	{tokensDesc, prometheus.CounterValue, "prompt", func(s Stats) int64 { return s.PromptTokens }},
	{tokensDesc, prometheus.CounterValue, "completion", func(s Stats) int64 { return s.CompletionTokens }},
	{prometheus.NewDesc("lab_provider_spend_micro_dollars_total", "What the calls served cost, in millionths of a dollar.", nil, nil),
		prometheus.CounterValue, "", func(s Stats) int64 { return s.MicroDollars }},
}

// collector exports a provider's Stats at each scrape, so /metrics and
// /stats never disagree.
type collector struct{ s *Server }

var _ prometheus.Collector = collector{}

// Describe sends the descriptions of statMetrics.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, m := range statMetrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
}

// Collect sends the provider's Stats.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range statMetrics {
		var labels []string
		if m.label != "" {
			labels = []string{m.label}
		}
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(st)), labels...)
	}
}
