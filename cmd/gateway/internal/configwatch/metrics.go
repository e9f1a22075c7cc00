package configwatch

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics say whether the file in force is the file on disk.
type metrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// newMetrics creates the metrics and registers them with reg, unless reg is
// nil.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Loads of the gateway configuration file, the one at start included, by result (success or failure).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "When the gateway configuration file last loaded successfully, in seconds since the Unix epoch.",
		}),
	}
	// Both results exist from the start, so a rate over them is never absent.
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.reloads, m.lastSuccess} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("configwatch: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) succeeded() {
	m.reloads.WithLabelValues("success").Inc()
	m.lastSuccess.SetToCurrentTime()
}

func (m *metrics) failed() {
	m.reloads.WithLabelValues("failure").Inc()
}
