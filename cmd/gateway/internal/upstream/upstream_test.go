package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// script answers each attempt with the next of its results: a status, or -1 for a failed
// connection.
type script struct {
	results []int
	headers []http.Header
	calls   int
	bodies  []string
}

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	s.bodies = append(s.bodies, string(body))
	i := s.calls
	s.calls++
	if s.results[i] < 0 {
		return nil, errors.New("connection refused")
	}
	h := http.Header{}
	if i < len(s.headers) && s.headers[i] != nil {
		h = s.headers[i]
	}
	return &http.Response{StatusCode: s.results[i], Header: h, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

func TestRetries(t *testing.T) {
	cases := []struct {
		name          string
		results       []int
		headers       []http.Header
		wantStatus    int // 0: an error
		wantSleeps    []time.Duration
		wantThrottles int
	}{
		{name: "success at once", results: []int{200}, wantStatus: 200},
		{name: "400 is never retried", results: []int{400, 200}, wantStatus: 400},
		{name: "401, 403, 404 and 422 neither", results: []int{422, 200}, wantStatus: 422},
		{name: "a 500 is retried with full jitter", results: []int{500, 502, 200}, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
		{name: "Anthropic's 529 is retried with full jitter, whatever its retry-after, and is no throttle", results: []int{529, 529, 200},
			headers: []http.Header{{"Retry-After": {"2"}}}, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
		{name: "a failed connection is retried", results: []int{-1, 200}, wantStatus: 200, wantSleeps: []time.Duration{50 * time.Millisecond}},
		{name: "retry-after-ms is obeyed", results: []int{429, 200}, headers: []http.Header{{"Retry-After-Ms": {"1500"}}}, wantStatus: 200,
			wantSleeps: []time.Duration{1500 * time.Millisecond}, wantThrottles: 1},
		{name: "retry-after in seconds is obeyed", results: []int{503, 200}, headers: []http.Header{{"Retry-After": {"2"}}}, wantStatus: 200,
			wantSleeps: []time.Duration{2 * time.Second}, wantThrottles: 1},
		{name: "a retry-after past the longest delay is not waited for", results: []int{429, 200}, headers: []http.Header{{"Retry-After": {"60"}}},
			wantStatus: 429, wantThrottles: 1},
		{name: "attempts are capped and the last answer returned", results: []int{500, 500, 500, 200}, wantStatus: 500,
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
		{name: "the last failed connection is the error", results: []int{-1, -1, -1}, wantStatus: 0,
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := &script{results: tc.results, headers: tc.headers}
			var sleeps []time.Duration
			throttles := 0
			tr := New(base, Options{
				MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second,
				Sleep:     func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
				Jitter:    func() float64 { return 0.5 },
				Throttled: func(int, time.Duration) { throttles++ },
			})
			req, _ := http.NewRequest(http.MethodPost, "http://provider.invalid/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
			resp, err := tr.RoundTrip(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
			}
			if status != tc.wantStatus {
				t.Errorf("status = %d, err = %v; want %d", status, err, tc.wantStatus)
			}
			if diff := cmp.Diff(tc.wantSleeps, sleeps); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if throttles != tc.wantThrottles {
				t.Errorf("throttles reported = %d; want %d", throttles, tc.wantThrottles)
			}
			for i, b := range base.bodies {
				if b != `{"model":"m"}` {
					t.Errorf("attempt %d sent body %q; want the request's body every time", i+1, b)
				}
			}
		})
	}
}

func TestACanceledCallIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	base := &script{results: []int{500, 200}}
	tr := New(base, Options{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second,
		Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://provider.invalid/", strings.NewReader("{}"))
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want context.Canceled", err)
	}
	if base.calls != 1 {
		t.Errorf("attempts = %d; want 1", base.calls)
	}
}

// TestUnreachableRetriesGoElsewhere checks that a retry after a failed connection is handed to
// Unreachable, which may send it elsewhere, and a retry after an answer is not.
func TestUnreachableRetriesGoElsewhere(t *testing.T) {
	s := &script{results: []int{-1, 500, 200}}
	var hosts []string
	tr := New(recordHost(s, &hosts), Options{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
		Sleep:       func(context.Context, time.Duration) error { return nil },
		Unreachable: func(retry *http.Request) { retry.URL.Host = "pod-b:8000" },
	})
	req, err := http.NewRequest(http.MethodPost, "http://pod-a:8000/v1/chat/completions", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
	}
	if diff := cmp.Diff([]string{"pod-a:8000", "pod-b:8000", "pod-b:8000"}, hosts); diff != "" {
		t.Errorf("hosts of the attempts (-want +got):\n%s", diff)
	}
}

// recordHost records the host of each attempt before sending it through next.
func recordHost(next http.RoundTripper, hosts *[]string) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		*hosts = append(*hosts, req.URL.Host)
		return next.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
