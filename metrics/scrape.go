package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"
)

const (
	// acceptText asks for the Prometheus text format, which every engine
	// serves.
	acceptText = "text/plain;version=0.0.4"
)

// The reasons a scrape fails, as the scrape errors metric counts them.
const (
	reasonTimeout   = "timeout"
	reasonConnect   = "connect"
	reasonStatus    = "status"
	reasonParse     = "parse"
	reasonNoMetrics = "no_metrics"
	reasonTooLarge  = "too_large"
	// reasonBadLine counts each line of a Pod's metrics that does not
	// parse and was skipped, in a scrape that still gave values.
	reasonBadLine = "bad_line"
)

// scrapeError is why one Pod gave no values.
type scrapeError struct {
	reason string
	err    error
}

func (e *scrapeError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *scrapeError) Unwrap() error { return e.err }

// sample is what one scrape of one Pod read.
type sample struct {
	target Target
	// values are the vocabulary's metrics the Pod reported. Nil when err
	// is set.
	values map[string]float64
	// at is when the scrape started.
	at time.Time
	// skipped is why lines of the Pod's metrics were skipped; nil if none
	// was.
	skipped error
	err     error
}

// scraper reads the Pods' metrics. It is safe for concurrent use.
type scraper struct {
	client    *http.Client
	workers   int
	timeout   time.Duration
	maxBytes  int64 // read from one Pod at most
	maxSeries int   // parsed from one Pod at most
	clock     clock.PassiveClock
	inst      *instruments
}

// all scrapes every target, at most s.workers at once, and returns one
// sample per target, in order.
func (s *scraper) all(ctx context.Context, targets []Target) []sample {
	samples := make([]sample, len(targets))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(s.workers, len(targets)) {
		wg.Go(func() {
			for i := range next {
				samples[i] = s.one(ctx, targets[i])
			}
		})
	}
	for i := range targets {
		next <- i
	}
	close(next)
	wg.Wait()
	return samples
}

// one scrapes one target within s.timeout.
func (s *scraper) one(ctx context.Context, t Target) sample {
	start := s.clock.Now()
	values, skipped, err := s.read(ctx, t)
	s.inst.observe(s.clock.Since(start), len(skipped), err)
	if err != nil {
		return sample{target: t, at: start, err: err}
	}
	return sample{target: t, values: values, at: start, skipped: errors.Join(skipped...)}
}

// read returns a Pod's values, and why lines of its metrics were skipped.
// A page that reports none of the engine's metrics is an error, a parse
// error if lines were skipped: a page that is not metrics at all (an HTML
// error page) never reads as an idle Pod.
func (s *scraper) read(ctx context.Context, t Target) (map[string]float64, []error, error) {
	families, skipped, err := s.fetch(ctx, t.URL)
	if err != nil {
		return nil, nil, err
	}
	values, reported := podValues(t.Engine, families)
	switch {
	case !reported && len(skipped) > 0:
		return nil, nil, &scrapeError{reasonParse, errors.Join(skipped...)}
	case len(values) == 0:
		return nil, nil, &scrapeError{reasonNoMetrics, fmt.Errorf("none of the engine's metrics in %d families", len(families))}
	}
	if waiting, ok := values[RequestsWaiting]; ok && t.GPUs > 0 {
		values[RequestsWaitingPerGPU] = waiting / float64(t.GPUs)
	}
	return values, skipped, nil
}

// fetch reads and parses one Pod's metrics, skipping the lines that do not
// parse, and returns why each was skipped.
func (s *scraper) fetch(ctx context.Context, url string) (map[string]*dto.MetricFamily, []error, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, &scrapeError{reasonConnect, err}
	}
	req.Header.Set("Accept", acceptText)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, transportError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	switch {
	case err != nil:
		return nil, nil, transportError(err)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, &scrapeError{reasonStatus, fmt.Errorf("answered %s", resp.Status)}
	case int64(len(body)) > s.maxBytes:
		return nil, nil, &scrapeError{reasonTooLarge, fmt.Errorf("answer longer than %d bytes", s.maxBytes)}
	case countSeries(body) > s.maxSeries:
		return nil, nil, &scrapeError{reasonTooLarge, fmt.Errorf("more than %d series", s.maxSeries)}
	}
	families, skipped, err := parseSkipping(body)
	if err != nil {
		return nil, nil, &scrapeError{reasonParse, err}
	}
	return families, skipped, nil
}

// countSeries counts the series of a text-format answer, before it is
// parsed: one a line that is neither empty nor a comment.
func countSeries(body []byte) int {
	n := 0
	for line := range bytes.Lines(body) {
		if line = bytes.TrimSpace(line); len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

func transportError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &scrapeError{reasonTimeout, err}
	}
	return &scrapeError{reasonConnect, err}
}
