package provider

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// statMetric is one metric read from Stats at each scrape.
type statMetric struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	labels []string // the values of the metric's labels, if it has any
	value  func(Stats) int64
}

var (
	callsDesc          = prometheus.NewDesc("lab_provider_calls_total", "Calls the provider decided about, by outcome.", []string{"outcome"}, nil)
	tokensDesc         = prometheus.NewDesc("lab_provider_tokens_total", "Tokens of the calls served, by kind.", []string{"kind"}, nil)
	tokenClassesDesc   = prometheus.NewDesc("lab_provider_token_classes_total", "Tokens of the calls served that are priced apart, by class; each is also in lab_provider_tokens_total as prompt or completion.", []string{"class"}, nil)
	tierTokensDesc     = prometheus.NewDesc("lab_provider_tier_tokens_total", "Tokens of the calls served, by service tier and kind; also in lab_provider_tokens_total.", []string{"tier", "kind"}, nil)
	tierSpendDesc      = prometheus.NewDesc("lab_provider_tier_spend_micro_dollars_total", "What the calls served cost, by service tier, in millionths of a dollar; also in lab_provider_spend_micro_dollars_total.", []string{"tier"}, nil)
	receivedDesc       = prometheus.NewDesc("lab_provider_requests_received_total", "API requests received, whatever their answer, by the route that took them.", []string{"route"}, nil)
	responsesDesc      = prometheus.NewDesc("lab_provider_responses_ended_total", "Responses of the Responses API that ended billed, by mode and status.", []string{"mode", "status"}, nil)
	responseTokensDesc = prometheus.NewDesc("lab_provider_responses_tokens_total", "Tokens billed for responses of the Responses API, by mode and kind; also in lab_provider_tokens_total.", []string{"mode", "kind"}, nil)
	responseSpendDesc  = prometheus.NewDesc("lab_provider_responses_spend_micro_dollars_total", "What responses of the Responses API cost, by mode, in millionths of a dollar; also in lab_provider_spend_micro_dollars_total.", []string{"mode"}, nil)
)

// statMetrics are the provider's metrics: the same numbers as /stats, but
// Received, which is sent by route.
var statMetrics = append([]statMetric{
	{callsDesc, prometheus.CounterValue, []string{"accepted"}, func(s Stats) int64 { return s.Accepted }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_requests"}, func(s Stats) int64 { return s.Rejected429Requests }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_requests_per_day"}, func(s Stats) int64 { return s.Rejected429RequestsPerDay }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_tokens"}, func(s Stats) int64 { return s.Rejected429Tokens }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_input_tokens"}, func(s Stats) int64 { return s.Rejected429InputTokens }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_output_tokens"}, func(s Stats) int64 { return s.Rejected429OutputTokens }},
	{callsDesc, prometheus.CounterValue, []string{"rejected_count_tokens"}, func(s Stats) int64 { return s.Rejected429CountTokens }},
	{callsDesc, prometheus.CounterValue, []string{"overloaded"}, func(s Stats) int64 { return s.Rejected503 }},
	{prometheus.NewDesc("lab_provider_calls_canceled_total", "Admitted calls whose client left before the answer.", nil, nil),
		prometheus.CounterValue, nil, func(s Stats) int64 { return s.Canceled }},
	{prometheus.NewDesc("lab_provider_in_flight", "Calls running now.", nil, nil),
		prometheus.GaugeValue, nil, func(s Stats) int64 { return s.InFlight }},
	{prometheus.NewDesc("lab_provider_in_flight_max", "The most calls that ran at once.", nil, nil),
		prometheus.GaugeValue, nil, func(s Stats) int64 { return s.MaxInFlightSeen }},
	{tokensDesc, prometheus.CounterValue, []string{"prompt"}, func(s Stats) int64 { return s.PromptTokens }},
	{tokensDesc, prometheus.CounterValue, []string{"completion"}, func(s Stats) int64 { return s.CompletionTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"cached_prompt"}, func(s Stats) int64 { return s.CachedPromptTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"cache_write_5m_prompt"}, func(s Stats) int64 { return s.CacheWrite5mPromptTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"cache_write_1h_prompt"}, func(s Stats) int64 { return s.CacheWrite1hPromptTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"audio_prompt"}, func(s Stats) int64 { return s.AudioPromptTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"reasoning"}, func(s Stats) int64 { return s.ReasoningTokens }},
	{tokenClassesDesc, prometheus.CounterValue, []string{"audio_completion"}, func(s Stats) int64 { return s.AudioCompletionTokens }},
	{prometheus.NewDesc("lab_provider_spend_micro_dollars_total", "What the calls served cost, in millionths of a dollar.", nil, nil),
		prometheus.CounterValue, nil, func(s Stats) int64 { return s.MicroDollars }},
	{prometheus.NewDesc("lab_provider_responses_stored", "Responses the provider keeps now.", nil, nil),
		prometheus.GaugeValue, nil, func(s Stats) int64 { return s.Responses.Stored }},
	{responsesDesc, prometheus.CounterValue, []string{"foreground", "completed"}, func(s Stats) int64 { return s.Responses.Completed }},
	{responsesDesc, prometheus.CounterValue, []string{"background", "completed"}, func(s Stats) int64 { return s.Responses.BackgroundCompleted }},
	{responsesDesc, prometheus.CounterValue, []string{"background", "cancelled"}, func(s Stats) int64 { return s.Responses.BackgroundCancelled }},
	{responseTokensDesc, prometheus.CounterValue, []string{"foreground", "input"}, func(s Stats) int64 { return s.Responses.Foreground.InputTokens }},
	{responseTokensDesc, prometheus.CounterValue, []string{"foreground", "output"}, func(s Stats) int64 { return s.Responses.Foreground.OutputTokens }},
	{responseTokensDesc, prometheus.CounterValue, []string{"background", "input"}, func(s Stats) int64 { return s.Responses.Background.InputTokens }},
	{responseTokensDesc, prometheus.CounterValue, []string{"background", "output"}, func(s Stats) int64 { return s.Responses.Background.OutputTokens }},
	{responseSpendDesc, prometheus.CounterValue, []string{"foreground"}, func(s Stats) int64 { return s.Responses.Foreground.MicroDollars }},
	{responseSpendDesc, prometheus.CounterValue, []string{"background"}, func(s Stats) int64 { return s.Responses.Background.MicroDollars }},
}, tierMetrics()...)

// tierMetrics are the metrics of the bill of each service tier.
func tierMetrics() []statMetric {
	var ms []statMetric
	for _, tier := range []string{openai.TierDefault, openai.TierPriority, openai.TierFlex} {
		bill := func(s Stats) Bill { return *s.Tiers.of(tier) }
		ms = append(ms,
			statMetric{tierTokensDesc, prometheus.CounterValue, []string{tier, "prompt"}, func(s Stats) int64 { return bill(s).InputTokens }},
			statMetric{tierTokensDesc, prometheus.CounterValue, []string{tier, "completion"}, func(s Stats) int64 { return bill(s).OutputTokens }},
			statMetric{tierSpendDesc, prometheus.CounterValue, []string{tier}, func(s Stats) int64 { return bill(s).MicroDollars }})
	}
	return ms
}

// collector exports a provider's Stats at each scrape, so /metrics and
// /stats never disagree.
type collector struct{ s *Server }

var _ prometheus.Collector = collector{}

// Describe sends the descriptions of statMetrics and of the requests
// received.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, m := range statMetrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
	ch <- receivedDesc
}

// Collect sends the provider's Stats.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range statMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(st)), m.labels...)
	}
	for _, route := range slices.Sorted(maps.Keys(st.Received)) {
		ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(st.Received[route]), route)
	}
}
