package metrics

import (
	"errors"
	"time"

	"k8s.io/component-base/metrics"
)

// instruments are the adapter's own metrics, served at its /metrics. They
// are safe for concurrent use.
type instruments struct {
	duration *metrics.Histogram
	errors   *metrics.CounterVec
	newest   *ageCollector
}

func newInstruments(newestAge func() (float64, bool)) *instruments {
	return &instruments{
		duration: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace:      "sluice_adapter",
			Name:           "scrape_duration_seconds",
			Help:           "Time one scrape of one Pod's /metrics took, failed ones included.",
			Buckets:        []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
			StabilityLevel: metrics.ALPHA,
		}),
		errors: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace:      "sluice_adapter",
			Name:           "scrape_errors_total",
			Help:           "Scrape errors by reason: timeout, connect, status, too_large, parse or no_metrics for a scrape of a Pod that gave no value; bad_line for each line of a Pod's metrics that did not parse and was skipped.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"reason"}),
		newest: &ageCollector{
			desc: metrics.NewDesc("sluice_adapter_newest_value_age_seconds",
				"Age of the newest Pod value held, when collected; absent before any Pod reported.",
				nil, nil, metrics.ALPHA, ""),
			age: newestAge,
		},
	}
}

// register registers every instrument: register takes the plain metrics,
// customRegister the collector that reads the age when it is collected.
// legacyregistry.Register and legacyregistry.CustomRegister fit, as do a
// KubeRegistry's methods.
func (in *instruments) register(register func(metrics.Registerable) error, customRegister func(metrics.StableCollector) error) error {
	return errors.Join(register(in.duration), register(in.errors), customRegister(in.newest))
}

// observe records one scrape: how long it took, the lines it skipped, and
// why it gave no value if it did not.
func (in *instruments) observe(took time.Duration, skippedLines int, err error) {
	in.duration.Observe(took.Seconds())
	if skippedLines > 0 {
		in.errors.WithLabelValues(reasonBadLine).Add(float64(skippedLines))
	}
	if se, ok := errors.AsType[*scrapeError](err); ok {
		in.errors.WithLabelValues(se.reason).Inc()
	}
}

// ageCollector reports the age of the newest value at the moment it is
// collected, so a stuck scrape loop shows as a growing age.
type ageCollector struct {
	metrics.BaseStableCollector
	desc *metrics.Desc
	// age returns the age in seconds and whether there is a value at all.
	age func() (float64, bool)
}

var _ metrics.StableCollector = (*ageCollector)(nil)

func (c *ageCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *ageCollector) CollectWithStability(ch chan<- metrics.Metric) {
	if age, ok := c.age(); ok {
		ch <- metrics.NewLazyConstMetric(c.desc, metrics.GaugeValue, age)
	}
}
