package overhead

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

const (
	// requestTimeout bounds one request, its answer read.
	requestTimeout = 5 * time.Second
	// stepGrace is how long past its length a step may go on before the
	// requests not yet sent are cut off.
	stepGrace = 5 * time.Second
	// startLead is how far ahead of now a step's first request is due, so
	// the workers are waiting for it.
	startLead = 10 * time.Millisecond
	// quiet is the pause after a step's last answer before its target's
	// CPU time is read: work left over, such as the gateway settling the
	// last requests, counts to the step.
	quiet = 200 * time.Millisecond
	// headerQueueWait is the gateway's header for the time a request
	// waited in its queue, in milliseconds.
	headerQueueWait = "X-Sluice-Queue-Wait-Ms"
)

// client sends the run's requests to one target. It is safe for concurrent
// use.
type client struct {
	target Target
	// url is the target's base URL, without /v1.
	url  string
	http *http.Client
	// proc is the target's process; nil for the stub, whose CPU time is
	// not counted.
	proc child
	// spans counts the spans a traced gateway has sent so far; nil for a
	// target that traces nothing.
	spans func() int64
	// metrics is the URL of a gateway's Prometheus metrics; empty for the
	// stub and the bare proxy, which serve none.
	metrics string
}

// newClient is a client of the target at url, with at most workers
// connections to it.
func newClient(t Target, url string, proc child, workers int) *client {
	transport := &http.Transport{
		MaxIdleConns:        workers,
		MaxIdleConnsPerHost: workers,
		MaxConnsPerHost:     workers,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &client{target: t, url: url, proc: proc, http: &http.Client{Transport: transport, Timeout: requestTimeout}}
}

// record is what happened to one request of a step.
type record struct {
	sent, answered bool
	// late is true when every worker was busy at its due time.
	late   bool
	queued bool
	// lag is from when it was due to when it left; latency to when its
	// answer had been read.
	lag, latency time.Duration
}

// load is how a step sends its calls: open-loop at Rate calls a second
// with at most Workers in flight, or, when Connections is above zero,
// closed-loop on that many connections, each sending its next call as soon
// as it has read the answer to the last.
type load struct {
	Rate, Workers, Connections int
}

// step sends shape's calls to c for d as l says, and measures them, and the
// target's CPU time.
func (c *client) step(ctx context.Context, shape Shape, l load, d time.Duration) (Step, error) {
	before, err := c.cpu()
	if err != nil {
		return Step{}, err
	}
	spans := c.spansSent()
	var records []record
	var idle, peak int64
	if l.Connections > 0 {
		idle, peak, records, err = c.saturateWatched(ctx, shape, l.Connections, d)
		if err != nil {
			return Step{}, err
		}
	} else {
		records = c.drive(ctx, shape, l.Rate, d, l.Workers)
	}
	time.Sleep(quiet)
	after, err := c.cpu()
	if err != nil {
		return Step{}, err
	}
	s := measure(records)
	s.Shape, s.Rate, s.Connections, s.Target = shape.Name, l.Rate, l.Connections, c.target
	s.CPUSeconds, s.Spans, s.Seconds = (after - before).Seconds(), c.spansSent()-spans, d.Seconds()
	s.IdleRSSBytes, s.PeakRSSBytes = idle, peak
	return s, nil
}

// saturateWatched is saturate, with the target's resident memory just
// before the step and the most sampled during it; both zero for the stub,
// which shares this process.
func (c *client) saturateWatched(ctx context.Context, shape Shape, conns int, d time.Duration) (idle, peak int64, _ []record, _ error) {
	if c.proc == nil {
		return 0, 0, c.saturate(ctx, shape, conns, d), nil
	}
	idle, err := rssOf(c.proc)
	if err != nil {
		return 0, 0, nil, err
	}
	w := watchRSS(c.proc)
	records := c.saturate(ctx, shape, conns, d)
	return idle, w.stop(), records, nil
}

// spansSent is the spans the target has sent so far; zero for one that traces nothing.
func (c *client) spansSent() int64 {
	if c.spans == nil {
		return 0
	}
	return c.spans()
}

// cpu is the CPU time the target's process has used; zero for the stub.
func (c *client) cpu() (time.Duration, error) {
	if c.proc == nil {
		return 0, nil
	}
	return cpuOf(c.proc)
}

// drive sends rate×d requests, the i-th due at start + i/rate, from
// workers goroutines that each take the next request due, wait for its time
// and send it. It stops sending stepGrace past d, or when ctx ends.
func (c *client) drive(ctx context.Context, shape Shape, rate int, d time.Duration, workers int) []record {
	records := make([]record, int(int64(rate)*int64(d)/int64(time.Second)))
	start := time.Now().Add(startLead)
	ctx, cancel := context.WithDeadline(ctx, start.Add(d+stepGrace))
	defer cancel()
	due := func(i int) time.Time { return start.Add(time.Duration(int64(i) * int64(time.Second) / int64(rate))) }
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(records); i = int(next.Add(1) - 1) {
				if !c.send(ctx, shape, i%users, due(i), &records[i]) {
					return
				}
			}
		})
	}
	wg.Wait()
	return records
}

// send sends one request, due at due, as user, when it is due, and
// records what happened to it in r. It reports false when ctx has ended.
func (c *client) send(ctx context.Context, shape Shape, user int, due time.Time, r *record) bool {
	if r.late = time.Now().After(due); !r.late && !labrun.SleepUntil(ctx, due) {
		return false
	}
	if ctx.Err() != nil {
		return false
	}
	sent := time.Now()
	r.answered, r.queued = c.post(ctx, shape, user)
	r.sent, r.lag, r.latency = true, sent.Sub(due), time.Since(due)
	return true
}

// saturate sends shape's calls to c for d on conns connections, each
// sending its next call as soon as it has read the answer to the last,
// and records them, the calls still in flight at d included. Each call is
// due when it leaves.
func (c *client) saturate(ctx context.Context, shape Shape, conns int, d time.Duration) []record {
	ctx, cancel := context.WithTimeout(ctx, d+stepGrace)
	defer cancel()
	end := time.Now().Add(d)
	perConn := make([][]record, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				if ctx.Err() != nil {
					return
				}
				sent := time.Now()
				answered, queued := c.post(ctx, shape, (i+n)%users)
				perConn[i] = append(perConn[i], record{sent: true, answered: answered, queued: queued, latency: time.Since(sent)})
			}
		})
	}
	wg.Wait()
	return slices.Concat(perConn...)
}

// post sends a call of shape as user and reads the answer whole. It reports
// whether the answer was a 200 and whether the gateway says the request
// waited in its queue.
func (c *client) post(ctx context.Context, shape Shape, user int) (answered, queued bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+shape.endpoint.Path(), bytes.NewReader(shape.body))
	if err != nil {
		return false, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+userKey(user))
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	wait := resp.Header.Get(headerQueueWait)
	return err == nil && resp.StatusCode == http.StatusOK, wait != "" && wait != "0"
}

// measure is the step the records tell of; its rate and target are left to
// the caller.
func measure(records []record) Step {
	s := Step{Counts: Counts{Requests: len(records)}}
	var lags []time.Duration
	for _, r := range records {
		switch {
		case !r.sent:
			s.Unsent++
			continue
		case r.answered:
			s.Answered++
			s.latencies = append(s.latencies, r.latency)
		default:
			s.Failed++
		}
		lags = append(lags, r.lag)
		s.Late += count(r.late)
		s.Queued += count(r.queued)
	}
	slices.Sort(s.latencies)
	slices.Sort(lags)
	s.P50Seconds = labrun.Percentile(s.latencies, 50).Seconds()
	s.P99Seconds = labrun.Percentile(s.latencies, 99).Seconds()
	s.SendLagP99Seconds = labrun.Percentile(lags, 99).Seconds()
	return s
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// progressLine is the line a step writes to progress.
func progressLine(label string, s Step) string {
	return fmt.Sprintf("%-8s %-13s %-8s  %-7s  answered %6d/%-6d  failed %4d  late %4d  p50 %s  p99 %s  CPU %.2fs\n",
		label, s.Shape, s.load(), s.Target, s.Answered, s.Requests, s.Failed, s.Late, ms(s.P50Seconds), ms(s.P99Seconds), s.CPUSeconds)
}
