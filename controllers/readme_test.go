package controllers

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/test/metricsdoc"
)

// TestEveryManagerMetricHasARowInTheREADME checks the manager's own series against the table of
// metrics in config/README.md: each has a row, and each sluice_manager_ row names one of them.
func TestEveryManagerMetricHasARowInTheREADME(t *testing.T) {
	var names []string
	for _, c := range []prometheus.Collector{objectsByReason} {
		descs := make(chan *prometheus.Desc, 8)
		c.Describe(descs)
		close(descs)
		for d := range descs {
			names = append(names, metricsdoc.NameOf(d))
		}
	}
	metricsdoc.Check(t, "../config/README.md", names, "sluice_manager_")
}
