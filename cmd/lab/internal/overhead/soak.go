package overhead

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
)

const (
	// soakShare is the share of the gateway's closed-loop calls a second
	// that the soak sends it.
	soakShare = 0.8
	// soakWindow is the longest a soak's window is; a sample follows each.
	soakWindow = 5 * time.Second
	// soakMinSamples is the fewest samples a soak takes, two in each third,
	// however short it is.
	soakMinSamples = 6
	// maxSoak bounds Options.Soak.
	maxSoak = time.Hour
	// flatHeapFactor bounds the soak's mean heap in use over its last
	// third as a multiple of its mean over its second; the first is the
	// warm-up.
	flatHeapFactor = 1.1
	// metricsTimeout bounds one read of the gateway's metrics.
	metricsTimeout = 2 * time.Second
)

// The gateway's metrics a soak samples, which the Go runtime's collector
// exports.
const (
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricGoroutines = "go_goroutines"
)

// Soak is the gateway's memory over a long open-loop step at a steady
// rate: whether a call leaves anything behind that piles up.
type Soak struct {
	// Shape is the shape of call sent: the run's first.
	Shape  string `json:"shape"`
	Target Target `json:"target"`
	// Rate is the calls a second sent, and RateFrom says how it was
	// chosen.
	Rate     int    `json:"rate"`
	RateFrom string `json:"rateFrom"`
	// Seconds is the soak's length.
	Seconds float64 `json:"seconds"`
	Counts
	// Samples are taken at the end of each window of the soak, in order.
	Samples []SoakSample `json:"samples"`
}

// SoakSample is the gateway at the end of one window of the soak, and
// what became of the window's calls.
type SoakSample struct {
	// Seconds is from the soak's start to the sample.
	Seconds float64 `json:"seconds"`
	// RSSBytes is the gateway's resident memory; zero if it could not be
	// read.
	RSSBytes int64 `json:"rssBytes"`
	// HeapInuseBytes and Goroutines are the gateway's heap in use and
	// goroutines, from its metrics; zero if they could not be read.
	HeapInuseBytes int64 `json:"heapInuseBytes"`
	Goroutines     int   `json:"goroutines"`
	Counts
	// P99Seconds is the window's answered calls' p99 latency.
	P99Seconds float64 `json:"p99Seconds"`
}

// soakRate is the calls a second a soak of the shape sends the gateway:
// soakShare of the calls a second it served on the closed loop of
// connections, when there was one and it served any; otherwise peak, the
// highest rate. from says which.
func soakRate(rs []Result, shape string, connections, peak int) (rate int, from string) {
	if connections > 0 {
		closed := find(rs, key{shape: shape, connections: connections, target: Gateway})
		if r := int(soakShare * closed.CallsPerSecond); r > 0 {
			return r, fmt.Sprintf("%.0f%% of the %.0f calls a second the gateway served on %s", 100*soakShare, closed.CallsPerSecond, loadName(0, connections))
		}
	}
	return peak, "the highest rate"
}

// soakWindows divides a soak of d into windows of soakWindow at most, and
// soakMinSamples at least, all of one length.
func soakWindows(d time.Duration) []time.Duration {
	n := max(soakMinSamples, int((d+soakWindow-1)/soakWindow))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d / time.Duration(n)
	}
	return out
}

// thirdMeans are the means of the second and the last third of xs, by
// their order; ok is false with fewer than three.
func thirdMeans(xs []float64) (second, last float64, ok bool) {
	n := len(xs)
	if n < 3 {
		return 0, 0, false
	}
	return mean(xs[n/3 : 2*n/3]), mean(xs[2*n/3:]), true
}

// mean is the mean of xs, which are not none.
func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// flatHeap checks that the soak's mean heap in use over its last third is
// at most flatHeapFactor times its mean over its second third. It is not
// measured when a sample has no heap, or there are fewer than three.
func flatHeap(s Soak) Check {
	c := checkOf(checkFlatHeap, fmt.Sprintf("at most %.1f × its mean over the second third", flatHeapFactor),
		key{shape: s.Shape, rate: s.Rate, target: s.Target})
	c.MaxRatio = flatHeapFactor
	heap := make([]float64, len(s.Samples))
	for i, sample := range s.Samples {
		if sample.HeapInuseBytes <= 0 {
			return c
		}
		heap[i] = float64(sample.HeapInuseBytes)
	}
	second, last, ok := thirdMeans(heap)
	if !ok {
		return c
	}
	c.Measured, c.Ratio = true, last/second
	c.Pass = c.Ratio <= c.MaxRatio
	return c
}

// soak sends the run's first shape of call to the gateway that keeps its
// limits in memory, open-loop at rate, for opts.Soak, a window at a time,
// and samples the gateway after each. When ctx ends it returns the
// windows that had finished, with ctx's error.
func (r *rig) soak(ctx context.Context, opts Options, rate int, from string, progress io.Writer) (*Soak, error) {
	c := r.client(Gateway)
	shape := opts.shapes()[0]
	s := &Soak{Shape: shape.Name, Target: Gateway, Rate: rate, RateFrom: from, Seconds: opts.Soak.Seconds()}
	start := time.Now()
	for _, w := range soakWindows(opts.Soak) {
		step := measure(c.drive(ctx, shape, rate, w, opts.Workers))
		if err := ctx.Err(); err != nil {
			return s, err
		}
		sample := c.sample(ctx)
		sample.Seconds, sample.Counts, sample.P99Seconds = time.Since(start).Seconds(), step.Counts, step.P99Seconds
		s.Samples, s.Counts = append(s.Samples, sample), s.Counts.plus(step.Counts)
		fmt.Fprint(progress, soakLine(*s, sample))
	}
	return s, nil
}

// client is the rig's client of target t; every run has one of Gateway.
func (r *rig) client(t Target) *client {
	for _, c := range r.clients {
		if c.target == t {
			return c
		}
	}
	panic(fmt.Sprintf("overhead: no target %s", t))
}

// sample is the target's resident memory, heap in use and goroutines;
// each zero if it could not be read.
func (c *client) sample(ctx context.Context) SoakSample {
	var s SoakSample
	if c.proc != nil {
		s.RSSBytes, _ = rssOf(c.proc)
	}
	if c.metrics != "" {
		s.HeapInuseBytes, s.Goroutines, _ = c.goMemory(ctx)
	}
	return s
}

// goMemory reads the gateway's heap in use and goroutines from its
// metrics.
func (c *client) goMemory(ctx context.Context) (heapInuse int64, goroutines int, _ error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metrics, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", "text/plain") // the text format, not protobuf or OpenMetrics
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("overhead: %s answered %s", c.metrics, resp.Status)
	}
	return parseGoMemory(body)
}

// parseGoMemory reads the heap in use and the goroutines from a page of
// Prometheus metrics in the text format.
func parseGoMemory(text []byte) (heapInuse int64, goroutines int, _ error) {
	parser := expfmt.NewTextParser(promodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return 0, 0, fmt.Errorf("overhead: metrics: %w", err)
	}
	gauge := func(name string) (float64, error) {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
			return 0, errors.New("overhead: metrics: no gauge " + name)
		}
		return f.GetMetric()[0].GetGauge().GetValue(), nil
	}
	heap, err := gauge(metricHeapInuse)
	if err != nil {
		return 0, 0, err
	}
	n, err := gauge(metricGoroutines)
	if err != nil {
		return 0, 0, err
	}
	return int64(heap), int(n), nil
}
