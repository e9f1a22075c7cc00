package admission

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The series of each provider's limits, by provider, dimension and per (how the limit counts:
// "a minute", "a day", "a month", "at once").
var (
	providerLimitDesc = prometheus.NewDesc("sluice_gateway_provider_limit",
		"Each of a provider's own limits in force, across every gateway: as configured, or as the provider reported it lower, less headroom; dollars in micro-dollars.",
		providerUseLabels, nil)
	providerUsedDesc = prometheus.NewDesc("sluice_gateway_provider_limit_used",
		"What a provider's calls hold of each of its limits now, read from the limiter's store every gateway shares: the last rolling minute's, today's or this month's count, or the calls in flight. Over sluice_gateway_provider_limit, the share used.",
		providerUseLabels, nil)
	providerUseLabels = []string{"provider", "dimension", "per"}
)

// providerUseRead bounds the read of the store at a scrape.
const providerUseRead = time.Second

// providerUse is the collector of each provider's use of each of its limits, read from the store
// at each scrape in one round trip. Every gateway reads the same store, and so reports the same
// figures. When the store does not answer, only the limits are reported.
type providerUse struct{ g *Gate }

var _ prometheus.Collector = providerUse{}

// Describe sends the descriptors of the limits' series.
func (u providerUse) Describe(ch chan<- *prometheus.Desc) {
	ch <- providerLimitDesc
	ch <- providerUsedDesc
}

// Collect reads the providers' limits from the store and sends their series.
func (u providerUse) Collect(ch chan<- prometheus.Metric) {
	p := u.g.policy()
	if p == nil {
		return
	}
	var limits []*ratelimit.Limit
	var providers []string
	for _, pr := range p.Providers() {
		for _, l := range pr.Limits() {
			limits, providers = append(limits, l), append(providers, pr.Name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), providerUseRead)
	defer cancel()
	readings, err := u.g.opts.Limiter.Peek(ctx, ratelimit.Reads(limits...), u.g.now())
	for i, l := range limits {
		_, per := l.Stated()
		labels := []string{providers[i], l.Dimension.String(), per}
		ch <- prometheus.MustNewConstMetric(providerLimitDesc, prometheus.GaugeValue, float64(l.Capacity()), labels...)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(providerUsedDesc, prometheus.GaugeValue, float64(max(l.Capacity()-readings[i].Remaining, 0)), labels...)
		}
	}
}
