package metrics

import (
	"testing"

	"k8s.io/component-base/metrics"

	"github.com/sluicehq/sluice/test/metricsdoc"
)

// TestEveryAdapterMetricHasARowInTheREADME checks the adapter's own series against the table of
// metrics in config/README.md: each has a row, and each sluice_adapter_ row names one of them.
func TestEveryAdapterMetricHasARowInTheREADME(t *testing.T) {
	var names []string
	in := newInstruments(func() (float64, bool) { return 0, false })
	err := in.register(func(r metrics.Registerable) error {
		names = append(names, r.FQName())
		return nil
	}, func(c metrics.StableCollector) error {
		descs := make(chan *metrics.Desc, 8)
		c.DescribeWithStability(descs)
		close(descs)
		for d := range descs {
			names = append(names, metricsdoc.NameOf(d))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	metricsdoc.Check(t, "../config/README.md", names, "sluice_adapter_")
}
