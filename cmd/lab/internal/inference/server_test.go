package inference

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testServer runs a server of the default options, serving the model "m"
// and edited by edit, until the test ends. Inside a synctest bubble, its
// time is the bubble's.
func testServer(t *testing.T, edit func(*Options)) *Server {
	t.Helper()
	opts := DefaultOptions()
	opts.Model = "m"
	if edit != nil {
		edit(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

func chat(tokens int64) string {
	return fmt.Sprintf(`{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":"hello world!"}]}`, tokens)
}

// serve sends body to the chat endpoint of s, directly.
func serve(ctx context.Context, s *Server, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	return w
}

func TestRequestTimes(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name       string
		maxNumSeqs int
		gpus       int
		tokens     []int64 // requests, sent in this order at the same time
		want       []time.Duration
	}{
		{name: "alone: 10 tokens × 20 ms × (1 + 1/4)", maxNumSeqs: 4, gpus: 1, tokens: []int64{10}, want: []time.Duration{250 * ms}},
		{name: "a full batch: twice the base latency", maxNumSeqs: 2, gpus: 2, tokens: []int64{10, 10, 10, 10},
			want: []time.Duration{400 * ms, 400 * ms, 400 * ms, 400 * ms}},
		{name: "over the batch: queued in order", maxNumSeqs: 1, gpus: 1, tokens: []int64{10, 10, 10},
			want: []time.Duration{400 * ms, 800 * ms, 1200 * ms}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := testServer(t, func(o *Options) { o.MaxNumSeqs, o.GPUs = tc.maxNumSeqs, tc.gpus })
				got := make([]time.Duration, len(tc.tokens))
				start := time.Now()
				for i, n := range tc.tokens {
					go func() {
						if w := serve(t.Context(), s, chat(n)); w.Code != http.StatusOK {
							t.Errorf("request %d: status %d (%s)", i, w.Code, w.Body)
						}
						got[i] = time.Since(start)
					}()
					synctest.Wait() // submitted before the next
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if diff := cmp.Diff(got, tc.want); diff != "" {
					t.Errorf("times in the bubble's fake clock mismatch (-got +want):\n%s", diff)
				}
			})
		})
	}
}

func TestLoadAndMetricsWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testServer(t, func(o *Options) { o.MaxNumSeqs = 2 })
		for range 3 {
			go serve(t.Context(), s, chat(10))
		}
		synctest.Wait()
		if got, want := s.Load(), (Load{Waiting: 1, Running: 2, Capacity: 2}); got != want {
			t.Errorf("Load() = %+v; want %+v", got, want)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		want := map[string]float64{
			`vllm:num_requests_waiting{model_name="m"}`: 1,
			`vllm:num_requests_running{model_name="m"}`: 2,
			`vllm:kv_cache_usage_perc{model_name="m"}`:  1,
		}
		if diff := cmp.Diff(samples(t, w.Body.Bytes()), want); diff != "" {
			t.Errorf("/metrics mismatch (-got +want):\n%s", diff)
		}
		time.Sleep(time.Minute) // all three finish
		if got, want := s.Load(), (Load{Capacity: 2}); got != want {
			t.Errorf("Load() after a minute = %+v; want %+v", got, want)
		}
	})
}

func TestClientThatLeavesGivesUpItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testServer(t, func(o *Options) { o.MaxNumSeqs = 1 })
		running, leaveRunning := context.WithCancel(t.Context())
		waiting, leaveWaiting := context.WithCancel(t.Context())
		go serve(running, s, chat(10))
		synctest.Wait()
		go serve(waiting, s, chat(10))
		synctest.Wait()
		steps := []struct {
			leave func()
			want  Load
		}{
			{func() {}, Load{Waiting: 1, Running: 1, Capacity: 1}},
			{leaveWaiting, Load{Running: 1, Capacity: 1}},
			{leaveRunning, Load{Capacity: 1}},
		}
		for i, st := range steps {
			st.leave()
			synctest.Wait()
			if got := s.Load(); got != st.want {
				t.Errorf("step %d: Load() = %+v; want %+v", i, got, st.want)
			}
		}
	})
}

func TestEngineMetricNames(t *testing.T) {
	tests := []struct {
		engine Engine
		want   map[string]float64
	}{
		{VLLM, map[string]float64{
			`vllm:num_requests_waiting{model_name="m"}`: 0,
			`vllm:num_requests_running{model_name="m"}`: 0,
			`vllm:kv_cache_usage_perc{model_name="m"}`:  0,
		}},
		{TGI, map[string]float64{`tgi_queue_size`: 0, `tgi_batch_current_size`: 0}},
		{SGLang, map[string]float64{
			`sglang:num_queue_reqs{model_name="m"}`:   0,
			`sglang:num_running_reqs{model_name="m"}`: 0,
			`sglang:token_usage{model_name="m"}`:      0,
		}},
		{LlamaCpp, map[string]float64{
			`llamacpp:requests_deferred`:    0,
			`llamacpp:requests_processing`:  0,
			`llamacpp:kv_cache_usage_ratio`: 0,
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.engine), func(t *testing.T) {
			s := testServer(t, func(o *Options) { o.Engine = tc.engine })
			srv := httptest.NewServer(s) // listens on 127.0.0.1, port 0
			defer srv.Close()
			resp, body := get(t, srv.URL+"/metrics")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /metrics: status %d", resp.StatusCode)
			}
			if diff := cmp.Diff(samples(t, body), tc.want); diff != "" {
				t.Errorf("/metrics mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestAPI(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path, body string
		wantStatus int
		wantType   string
		want       string // the body, or the last event of a stream before [DONE]
	}{{
		name: "chat", method: "POST", path: "/v1/chat/completions", body: chat(2),
		wantStatus: 200, wantType: "application/json",
		want: `"choices":[{"index":0,"message":{"role":"assistant","content":"the lab "},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	}, {
		name: "completions streamed with usage", method: "POST", path: "/v1/completions",
		body:       `{"model":"m","prompt":"hello","max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		wantStatus: 200, wantType: "text/event-stream",
		want: `"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`,
	}, {
		name: "models", method: "GET", path: "/v1/models",
		wantStatus: 200, wantType: "application/json",
		want: `{"object":"list","data":[{"id":"m","object":"model","created":0,"owned_by":"vllm"}]}`,
	}, {
		name: "unknown model", method: "POST", path: "/v1/chat/completions", body: `{"model":"x","messages":[{"content":"hi"}]}`,
		wantStatus: 400, wantType: "application/json",
		want: `{"error":{"message":"The model ` + "`x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
	}, {
		name: "no embeddings", method: "POST", path: "/v1/embeddings", body: `{"model":"m","input":"hi"}`,
		wantStatus: 404, wantType: "application/json",
		want: `{"error":{"message":"Invalid URL (POST /v1/embeddings)","type":"invalid_request_error","param":null,"code":null}}`,
	}, {
		name: "health", method: "GET", path: "/health", wantStatus: 200,
	}}
	s := testServer(t, func(o *Options) { o.TokenLatency = time.Microsecond })
	srv := httptest.NewServer(s) // listens on 127.0.0.1, port 0
	defer srv.Close()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.method, srv.URL+tc.path, tc.body)
			got := []string{fmt.Sprint(resp.StatusCode), resp.Header.Get("Content-Type"), last(string(body))}
			if !strings.HasSuffix(got[2], tc.want) {
				t.Errorf("body %s; want it to end with %s", got[2], tc.want)
			}
			got[2] = ""
			if diff := cmp.Diff(got, []string{fmt.Sprint(tc.wantStatus), tc.wantType, ""}); diff != "" {
				t.Errorf("status and content type mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// last is a JSON body, or the last event of a stream before [DONE].
func last(body string) string {
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(events) < 2 {
		return strings.TrimSpace(body)
	}
	return strings.TrimPrefix(events[len(events)-2], "data: ")
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url, "")
}

func do(t *testing.T, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, data
}

// samples parses a Prometheus text exposition into `name{label="value"}`
// keys and their values.
func samples(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, body)
	}
	got := map[string]float64{}
	for name, f := range families {
		if f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v; want a gauge", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + `="` + l.GetValue() + `"}`
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	return got
}
