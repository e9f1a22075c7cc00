package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/clock"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// The caps of a test's scraper: above every sample page, small enough to pass in a test.
const (
	testMaxBytes  = 64 << 10
	testMaxSeries = 200
)

func newTestScraper(t *testing.T, workers int, timeout time.Duration) (*scraper, basemetrics.KubeRegistry) {
	t.Helper()
	inst := newInstruments(func() (float64, bool) { return 0, false })
	reg := basemetrics.NewKubeRegistry()
	if err := inst.register(reg.Register, reg.CustomRegister); err != nil {
		t.Fatal(err)
	}
	return &scraper{client: &http.Client{}, workers: workers, timeout: timeout, maxBytes: testMaxBytes, maxSeries: testMaxSeries,
		clock: clock.RealClock{}, inst: inst}, reg
}

// TestScrapeReadsTheEnginesMetrics scrapes a vLLM Pod with two GPUs.
func TestScrapeReadsTheEnginesMetrics(t *testing.T) {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Accept") != acceptText {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "vllm:num_requests_waiting{model_name=\"m\"} 5\nvllm:num_requests_running{model_name=\"m\"} 32\n")
	}))
	defer pod.Close()
	s, _ := newTestScraper(t, 1, time.Second)

	got := s.one(context.Background(), Target{URL: pod.URL + "/metrics", Engine: v1alpha1.EngineVLLM, GPUs: 2})
	if got.err != nil {
		t.Fatal(got.err)
	}
	want := map[string]float64{RequestsWaiting: 5, RequestsRunning: 32, RequestsWaitingPerGPU: 2.5}
	if diff := cmp.Diff(want, got.values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

// TestScrapeSkipsBadLines scrapes a vLLM Pod whose page has an exemplar
// and a -nan value: the Pod keeps its values, and each line skipped is
// counted.
func TestScrapeSkipsBadLines(t *testing.T) {
	page := vllmSample +
		"# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"1.0\",model_name=\"m\"} 3 # {trace_id=\"4bf92f3577b34da6\"} 0.7 1717000000.000\n" +
		"# TYPE nv_gpu_power_usage gauge\n" +
		"nv_gpu_power_usage{gpu_uuid=\"GPU-0\"} -nan\n"
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, page) }))
	defer pod.Close()
	s, reg := newTestScraper(t, 1, time.Second)

	got := s.one(context.Background(), Target{URL: pod.URL + "/metrics", Engine: v1alpha1.EngineVLLM})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if diff := cmp.Diff(map[string]float64{RequestsWaiting: 7, RequestsRunning: 30}, got.values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if got.skipped == nil {
		t.Error("skipped = nil; want the lines skipped")
	}
	assertScrapeErrors(t, reg, map[string]float64{reasonBadLine: 2})
}

// TestScrapeReadsAnIdleTGIPod scrapes a TGI Pod before its first request,
// whose page is empty: named TGI it is idle, unnamed it tells nothing.
func TestScrapeReadsAnIdleTGIPod(t *testing.T) {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer pod.Close()
	s, reg := newTestScraper(t, 1, time.Second)

	got := s.one(context.Background(), Target{URL: pod.URL + "/metrics", Engine: v1alpha1.EngineTGI, GPUs: 1})
	if got.err != nil {
		t.Fatal(got.err)
	}
	want := map[string]float64{RequestsWaiting: 0, RequestsRunning: 0, RequestsWaitingPerGPU: 0}
	if diff := cmp.Diff(want, got.values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}

	unnamed := s.one(context.Background(), Target{URL: pod.URL + "/metrics"})
	if se, ok := errors.AsType[*scrapeError](unnamed.err); !ok || se.reason != reasonNoMetrics {
		t.Errorf("unnamed engine: err = %v; want a %s error", unnamed.err, reasonNoMetrics)
	}
	assertScrapeErrors(t, reg, map[string]float64{reasonNoMetrics: 1}) // the unnamed scrape's only
}

// TestScrapeDoesNotTakeAnErrorPageForAnIdleTGIPod scrapes a TGI Pod whose
// port answers 200 with a page that is not metrics: it has no value.
func TestScrapeDoesNotTakeAnErrorPageForAnIdleTGIPod(t *testing.T) {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html>\n<body>upstream connect error</body>\n</html>\n")
	}))
	defer pod.Close()
	s, reg := newTestScraper(t, 1, time.Second)

	got := s.one(context.Background(), Target{URL: pod.URL + "/metrics", Engine: v1alpha1.EngineTGI})
	if se, ok := errors.AsType[*scrapeError](got.err); !ok || se.reason != reasonParse {
		t.Errorf("err = %v; want a %s error", got.err, reasonParse)
	}
	if got.values != nil {
		t.Errorf("values = %v; want none", got.values)
	}
	assertScrapeErrors(t, reg, map[string]float64{reasonParse: 1})
}

func assertScrapeErrors(t *testing.T, reg basemetrics.KubeRegistry, want map[string]float64) {
	t.Helper()
	counts, err := testutil.GetCounterValuesFromGatherer(reg, "sluice_adapter_scrape_errors_total", nil, "reason")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("scrape errors (-want +got):\n%s", diff)
	}
}

// TestScrapeFailuresGiveNoValue checks that every way a Pod can fail to
// report leaves it without values, and is counted by reason.
func TestScrapeFailuresGiveNoValue(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil means nothing listens
		reason  string
	}{
		{name: "nothing listens", reason: reasonConnect},
		{name: "no answer in time", handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, reason: reasonTimeout},
		{name: "an error status", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "loading model", http.StatusServiceUnavailable)
		}, reason: reasonStatus},
		{name: "not the text format", handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>{not metrics\n") }, reason: reasonParse},
		{name: "more bytes than the cap", handler: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "# HELP %s\nvllm:num_requests_waiting 1\n", strings.Repeat("x", testMaxBytes))
		}, reason: reasonTooLarge},
		{name: "more series than the cap", handler: func(w http.ResponseWriter, r *http.Request) {
			for i := range testMaxSeries + 1 {
				fmt.Fprintf(w, "vllm:num_requests_waiting{model_name=\"m%d\"} 1\n", i)
			}
		}, reason: reasonTooLarge},
		{name: "none of the engine's metrics", handler: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "process_cpu_seconds_total 3\n")
		}, reason: reasonNoMetrics},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := closed.URL
			if tc.handler != nil {
				pod := httptest.NewServer(tc.handler)
				defer pod.Close()
				url = pod.URL
			}
			s, reg := newTestScraper(t, 1, 100*time.Millisecond)

			got := s.one(context.Background(), Target{URL: url + "/metrics", Engine: v1alpha1.EngineVLLM})
			if se, ok := errors.AsType[*scrapeError](got.err); !ok || se.reason != tc.reason {
				t.Errorf("err = %v; want a %s error", got.err, tc.reason)
			}
			if got.values != nil {
				t.Errorf("values = %v; want none", got.values)
			}
			assertScrapeErrors(t, reg, map[string]float64{tc.reason: 1})
		})
	}
}

// TestScrapeAllIsBounded scrapes more Pods than workers and checks that no
// more than the workers were ever scraped at once, and every Pod once.
func TestScrapeAllIsBounded(t *testing.T) {
	const pods, workers = 24, 3
	var mu sync.Mutex
	inFlight, most, calls := 0, 0, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		calls[r.URL.Path]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		time.Sleep(5 * time.Millisecond) // let the workers overlap
		fmt.Fprint(w, "tgi_queue_size 1\n")
	}))
	defer srv.Close()
	targets := make([]Target, pods)
	for i := range targets {
		targets[i] = Target{URL: fmt.Sprintf("%s/pod-%d", srv.URL, i)}
	}
	s, _ := newTestScraper(t, workers, time.Second)

	samples := s.all(context.Background(), targets)
	for i, got := range samples {
		if got.err != nil || got.target.URL != targets[i].URL || got.values[RequestsWaiting] != 1 {
			t.Errorf("sample %d = %+v; want target %d's value", i, got, i)
		}
	}
	if most > workers {
		t.Errorf("%d scrapes ran at once; want at most %d", most, workers)
	}
	if len(calls) != pods {
		t.Errorf("%d Pods were scraped; want %d", len(calls), pods)
	}
	for path, n := range calls {
		if n != 1 {
			t.Errorf("%s was scraped %d times; want once", path, n)
		}
	}
}
