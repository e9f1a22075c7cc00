package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

const testKey = "sk-test"

// instant is a Sleep that returns at once, unless ctx is done.
func instant(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// start runs a provider on loopback with the default account, the key
// testKey, calls that take no time and a clock standing at t0 until the
// test moves it.
func start(t *testing.T, edit func(*Options)) (*Server, *httptest.Server, *testingclock.FakePassiveClock) {
	t.Helper()
	clk := testingclock.NewFakePassiveClock(t0)
	opts := DefaultOptions()
	opts.APIKey, opts.Clock, opts.Sleep = testKey, clk, instant
	if edit != nil {
		edit(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	srv := httptest.NewServer(p) // listens on 127.0.0.1, port 0
	t.Cleanup(srv.Close)
	t.Cleanup(p.Close) // first, so that the streams of background responses end
	return p, srv, clk
}

var client = &http.Client{Timeout: 10 * time.Second}

// do sends a request with key (none if empty) and returns the answer and
// its body.
func do(t *testing.T, method, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
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

// chatUsage is a chat's usage of prompt and completion tokens, with none
// in any class.
func chatUsage(prompt, completion int64) *openai.Usage {
	return &openai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: &openai.PromptTokensDetails{}, CompletionTokensDetails: &openai.CompletionTokensDetails{}}
}

func TestAnswers(t *testing.T) {
	const chat = `"model":"gpt-4o-mini","messages":[{"role":"user","content":"Summarise this page."}]` // 20 bytes: 5 tokens
	tests := []struct {
		name      string
		path      string
		body      string
		wantType  string
		wantUsage *openai.Usage // nil: no usage anywhere in the answer
		wantText  int64         // tokens of text in the answer
		wantBill  int64         // prompt and completion tokens billed
	}{{
		name:      "chat as JSON",
		path:      "/v1/chat/completions",
		body:      `{` + chat + `,"max_tokens":40}`,
		wantType:  "application/json",
		wantUsage: chatUsage(5, 40),
		wantText:  40,
		wantBill:  45,
	}, {
		name:      "chat as JSON with the default completion",
		path:      "/v1/chat/completions",
		body:      `{` + chat + `}`,
		wantType:  "application/json",
		wantUsage: chatUsage(5, 200),
		wantText:  200,
		wantBill:  205,
	}, {
		name:     "chat streamed without usage",
		path:     "/v1/chat/completions",
		body:     `{` + chat + `,"max_tokens":40,"stream":true}`,
		wantType: "text/event-stream",
		wantText: 40,
		wantBill: 45,
	}, {
		name:      "chat streamed with the final usage chunk",
		path:      "/v1/chat/completions",
		body:      `{` + chat + `,"max_completion_tokens":40,"stream":true,"stream_options":{"include_usage":true}}`,
		wantType:  "text/event-stream",
		wantUsage: chatUsage(5, 40),
		wantText:  40,
		wantBill:  45,
	}, {
		name:      "completions as JSON",
		path:      "/v1/completions",
		body:      `{"model":"gpt-4o-mini","prompt":"Once upon a time","max_tokens":3}`,
		wantType:  "application/json",
		wantUsage: &openai.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7},
		wantText:  3,
		wantBill:  7,
	}, {
		name:      "completions streamed with usage",
		path:      "/v1/completions",
		body:      `{"model":"gpt-4o-mini","prompt":"Once upon a time","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		wantType:  "text/event-stream",
		wantUsage: &openai.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7},
		wantText:  3,
		wantBill:  7,
	}, {
		name:      "embeddings",
		path:      "/v1/embeddings",
		body:      `{"model":"text-embedding-3-small","input":["one page","another"]}`,
		wantType:  "application/json",
		wantUsage: &openai.Usage{PromptTokens: 4, TotalTokens: 4},
		wantBill:  4,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := start(t, nil)
			resp, body := do(t, http.MethodPost, srv.URL+tc.path, testKey, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d (%s); want 200", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.wantType {
				t.Errorf("Content-Type = %q; want %q", got, tc.wantType)
			}
			usage, text := read(t, tc.wantType, body)
			if diff := cmp.Diff(usage, tc.wantUsage); diff != "" {
				t.Errorf("usage mismatch (-got +want):\n%s", diff)
			}
			if got := openai.TokensOf(text); got != tc.wantText {
				t.Errorf("answer text is %d tokens; want %d", got, tc.wantText)
			}
			st := p.Stats()
			got := []int64{st.Accepted, st.InFlight, st.PromptTokens + st.CompletionTokens, st.MicroDollars}
			if diff := cmp.Diff(got, []int64{1, 0, tc.wantBill, 3 * tc.wantBill}); diff != "" {
				t.Errorf("accepted, in flight, tokens and micro-dollars billed mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// answer is the part of a JSON answer or a chunk that the tests read.
type answer struct {
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
}

// read returns the usage of a JSON answer or stream (nil if none) and its
// text. A stream must end with [DONE] and have usage only in a last chunk
// without choices.
func read(t *testing.T, contentType string, body []byte) (*openai.Usage, string) {
	t.Helper()
	if contentType == "application/json" {
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		return a.Usage, a.text()
	}
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if last := events[len(events)-1]; last != "data: [DONE]" {
		t.Errorf("last event = %q; want data: [DONE]", last)
	}
	var usage *openai.Usage
	var text strings.Builder
	for i, ev := range events[:len(events)-1] {
		var a answer
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &a); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if a.Usage != nil && (i != len(events)-2 || len(a.Choices) != 0) {
			t.Errorf("event %d of %d has usage; want it only in the last, without choices", i, len(events)-1)
		}
		usage = a.Usage
		text.WriteString(a.text())
	}
	return usage, text.String()
}

func (a answer) text() string {
	var s strings.Builder
	for _, c := range a.Choices {
		s.WriteString(c.Text + c.Message.Content + c.Delta.Content)
	}
	return s.String()
}

// rateHeaders are the rate-limit headers of an answer, and retry-after.
func rateHeaders(h http.Header) map[string]string {
	got := map[string]string{}
	for _, k := range []string{
		"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
		"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
		"retry-after", "retry-after-ms",
	} {
		if v := h.Get(k); v != "" {
			got[k] = v
		}
	}
	return got
}

func headers(reqs, remReqs, toks, remToks, reset string) map[string]string {
	return map[string]string{
		"x-ratelimit-limit-requests": reqs, "x-ratelimit-remaining-requests": remReqs, "x-ratelimit-reset-requests": reset,
		"x-ratelimit-limit-tokens": toks, "x-ratelimit-remaining-tokens": remToks, "x-ratelimit-reset-tokens": reset,
	}
}

func retry(h map[string]string, s, ms string) map[string]string {
	h["retry-after"], h["retry-after-ms"] = s, ms
	return h
}

func TestRateLimits(t *testing.T) {
	// 3 prompt + 100 completion tokens a call.
	const call = `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello world"}]}`
	type step struct {
		after      time.Duration // moves the clock before the call
		wantStatus int
		wantType   string // of the error
		wantWord   string // in the error message
		want       map[string]string
	}
	tests := []struct {
		name     string
		rpm, tpm int64
		steps    []step
	}{{
		name: "requests run out and come back 60 s later",
		rpm:  2, tpm: 10_000,
		steps: []step{
			{wantStatus: 200, want: headers("2", "1", "10000", "9897", "1m0s")},
			{after: 15 * time.Second, wantStatus: 200, want: headers("2", "0", "10000", "9794", "1m0s")},
			{after: 500 * time.Millisecond, wantStatus: 429, wantType: "requests", wantWord: "requests per min",
				want: retry(headers("2", "0", "10000", "9794", "59.5s"), "45", "44500")},
			{after: 44500 * time.Millisecond, wantStatus: 200, want: headers("2", "0", "10000", "9794", "1m0s")},
		},
	}, {
		name: "tokens run out and come back 60 s later",
		rpm:  100, tpm: 250,
		steps: []step{
			{wantStatus: 200, want: headers("100", "99", "250", "147", "1m0s")},
			{after: 1 * time.Second, wantStatus: 200, want: headers("100", "98", "250", "44", "1m0s")},
			{after: 1500 * time.Millisecond, wantStatus: 429, wantType: "tokens", wantWord: "tokens per min",
				want: retry(headers("100", "98", "250", "44", "58.5s"), "58", "57500")},
			{after: 57500 * time.Millisecond, wantStatus: 200, want: headers("100", "98", "250", "44", "1m0s")},
		},
	}, {
		name: "a call larger than the minute is refused without a retry",
		rpm:  100, tpm: 100,
		steps: []step{
			{wantStatus: 429, wantType: "tokens", wantWord: "Request too large", want: headers("100", "100", "100", "100", "0s")},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, clk := start(t, func(o *Options) { o.RequestsPerMinute, o.TokensPerMinute = tc.rpm, tc.tpm })
			for i, st := range tc.steps {
				clk.SetTime(clk.Now().Add(st.after))
				resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, call)
				if resp.StatusCode != st.wantStatus {
					t.Fatalf("step %d: status = %d (%s); want %d", i, resp.StatusCode, body, st.wantStatus)
				}
				if diff := cmp.Diff(rateHeaders(resp.Header), st.want); diff != "" {
					t.Errorf("step %d: headers mismatch (-got +want):\n%s", i, diff)
				}
				if st.wantType == "" {
					continue
				}
				e := errorOf(t, body)
				if e.Type != st.wantType || e.Code != "rate_limit_exceeded" || !strings.Contains(e.Message, st.wantWord) {
					t.Errorf("step %d: error = %+v; want type %q, code rate_limit_exceeded and %q in the message", i, e, st.wantType, st.wantWord)
				}
			}
		})
	}
}

// apiError is OpenAI's error body, as a client reads it.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func errorOf(t *testing.T, body []byte) apiError {
	t.Helper()
	var e struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		t.Fatalf("body %s is not an error body (%v)", body, err)
	}
	return *e.Error
}

func TestRefusals(t *testing.T) {
	param := func(s string) *string { return &s }
	tests := []struct {
		name       string
		method     string
		path, key  string
		body       string
		wantStatus int
		want       apiError
		wantRoute  string // the route that received it
	}{{
		name: "no key", method: "POST", path: "/v1/chat/completions",
		body:       `{"model":"gpt-4o","messages":[{"content":"hi"}]}`,
		wantStatus: 401,
		want:       apiError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided. You can find your API key in the lab's configuration."},
		wantRoute:  "POST /v1/chat/completions",
	}, {
		name: "wrong key", method: "GET", path: "/v1/models", key: "sk-wrong",
		wantStatus: 401,
		want:       apiError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided. You can find your API key in the lab's configuration."},
		wantRoute:  "GET /v1/models",
	}, {
		name: "malformed JSON", method: "POST", path: "/v1/chat/completions", key: testKey,
		body:       `{"model":`,
		wantStatus: 400,
		want:       apiError{Type: "invalid_request_error", Message: "We could not parse the JSON body of your request."},
		wantRoute:  "POST /v1/chat/completions",
	}, {
		name: "no model", method: "POST", path: "/v1/completions", key: testKey,
		body:       `{"prompt":"hi"}`,
		wantStatus: 400,
		want:       apiError{Type: "invalid_request_error", Param: param("model"), Message: "You must provide a model parameter."},
		wantRoute:  "POST /v1/completions",
	}, {
		name: "unknown model", method: "POST", path: "/v1/embeddings", key: testKey,
		body:       `{"model":"gpt-9","input":"hi"}`,
		wantStatus: 400,
		want:       apiError{Type: "invalid_request_error", Param: param("model"), Code: "model_not_found", Message: "The model `gpt-9` does not exist or you do not have access to it."},
		wantRoute:  "POST /v1/embeddings",
	}, {
		name: "unknown path", method: "GET", path: "/v1/chat/completions", key: testKey,
		wantStatus: 404,
		want:       apiError{Type: "invalid_request_error", Message: "Invalid URL (GET /v1/chat/completions)"},
		wantRoute:  "/",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := start(t, nil)
			resp, body := do(t, tc.method, srv.URL+tc.path, tc.key, tc.body)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status = %d; want %d", resp.StatusCode, tc.wantStatus)
			}
			if diff := cmp.Diff(errorOf(t, body), tc.want); diff != "" {
				t.Errorf("error mismatch (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(rateHeaders(resp.Header), headers("1500", "1500", "300000", "300000", "0s")); diff != "" {
				t.Errorf("headers mismatch (-got +want):\n%s", diff)
			}
			want := Stats{Received: map[string]int64{tc.wantRoute: 1}}
			if diff := cmp.Diff(p.Stats(), want); diff != "" {
				t.Errorf("Stats() mismatch, want nothing counted but the request received (-got +want):\n%s", diff)
			}
		})
	}
}

func TestModels(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) { o.Models = []string{"a", "b"} })
	resp, body := do(t, http.MethodGet, srv.URL+"/v1/models", testKey, "")
	want := `{"object":"list","data":[{"id":"a","object":"model","created":0,"owned_by":"sluice-lab"},{"id":"b","object":"model","created":0,"owned_by":"sluice-lab"}]}`
	if got := strings.TrimSpace(string(body)); resp.StatusCode != 200 || got != want {
		t.Errorf("GET /v1/models = %d %s; want 200 %s", resp.StatusCode, got, want)
	}
}

func TestStatsAndMetrics(t *testing.T) {
	// 3 prompt + 100 completion tokens a call; the minute has room for two.
	const call = `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello world"}]}`
	_, srv, _ := start(t, func(o *Options) { o.TokensPerMinute = 250 })
	for range 3 {
		do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, call)
	}

	_, body := do(t, http.MethodGet, srv.URL+"/stats", "", "")
	var got Stats
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET /stats: %s: %v", body, err)
	}
	want := Stats{Accepted: 2, Rejected429Tokens: 1, MaxInFlightSeen: 1, PromptTokens: 6, CompletionTokens: 200, MicroDollars: 2 * 309,
		Tiers:    TierBills{Default: Bill{InputTokens: 6, OutputTokens: 200, MicroDollars: 2 * 309}},
		Received: map[string]int64{"POST /v1/chat/completions": 3}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("GET /stats mismatch (-got +want):\n%s", diff)
	}

	_, body = do(t, http.MethodGet, srv.URL+"/metrics", "", "")
	wantMetrics := map[string]float64{
		`lab_provider_calls_total{outcome="accepted"}`:                             2,
		`lab_provider_calls_total{outcome="rejected_requests"}`:                    0,
		`lab_provider_calls_total{outcome="rejected_tokens"}`:                      1,
		`lab_provider_calls_total{outcome="rejected_input_tokens"}`:                0,
		`lab_provider_calls_total{outcome="rejected_output_tokens"}`:               0,
		`lab_provider_calls_total{outcome="rejected_requests_per_day"}`:            0,
		`lab_provider_calls_total{outcome="rejected_count_tokens"}`:                0,
		`lab_provider_calls_total{outcome="overloaded"}`:                           0,
		`lab_provider_calls_canceled_total`:                                        0,
		`lab_provider_in_flight`:                                                   0,
		`lab_provider_in_flight_max`:                                               1,
		`lab_provider_tokens_total{kind="prompt"}`:                                 6,
		`lab_provider_tokens_total{kind="completion"}`:                             200,
		`lab_provider_spend_micro_dollars_total`:                                   618,
		`lab_provider_token_classes_total{class="cached_prompt"}`:                  0,
		`lab_provider_token_classes_total{class="cache_write_5m_prompt"}`:          0,
		`lab_provider_token_classes_total{class="cache_write_1h_prompt"}`:          0,
		`lab_provider_token_classes_total{class="audio_prompt"}`:                   0,
		`lab_provider_token_classes_total{class="reasoning"}`:                      0,
		`lab_provider_token_classes_total{class="audio_completion"}`:               0,
		`lab_provider_tier_tokens_total{kind="prompt",tier="default"}`:             6,
		`lab_provider_tier_tokens_total{kind="completion",tier="default"}`:         200,
		`lab_provider_tier_spend_micro_dollars_total{tier="default"}`:              618,
		`lab_provider_tier_tokens_total{kind="prompt",tier="priority"}`:            0,
		`lab_provider_tier_tokens_total{kind="completion",tier="priority"}`:        0,
		`lab_provider_tier_spend_micro_dollars_total{tier="priority"}`:             0,
		`lab_provider_tier_tokens_total{kind="prompt",tier="flex"}`:                0,
		`lab_provider_tier_tokens_total{kind="completion",tier="flex"}`:            0,
		`lab_provider_tier_spend_micro_dollars_total{tier="flex"}`:                 0,
		`lab_provider_requests_received_total{route="POST /v1/chat/completions"}`:  3,
		`lab_provider_responses_stored`:                                            0,
		`lab_provider_responses_ended_total{mode="foreground",status="completed"}`: 0,
		`lab_provider_responses_ended_total{mode="background",status="completed"}`: 0,
		`lab_provider_responses_ended_total{mode="background",status="cancelled"}`: 0,
		`lab_provider_responses_tokens_total{kind="input",mode="foreground"}`:      0,
		`lab_provider_responses_tokens_total{kind="output",mode="foreground"}`:     0,
		`lab_provider_responses_tokens_total{kind="input",mode="background"}`:      0,
		`lab_provider_responses_tokens_total{kind="output",mode="background"}`:     0,
		`lab_provider_responses_spend_micro_dollars_total{mode="foreground"}`:      0,
		`lab_provider_responses_spend_micro_dollars_total{mode="background"}`:      0,
	}
	if diff := cmp.Diff(samples(t, body), wantMetrics); diff != "" {
		t.Errorf("GET /metrics mismatch (-got +want):\n%s", diff)
	}
}

// samples parses a Prometheus text exposition into "name{label="value"}"
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
		for _, m := range f.GetMetric() {
			got[name+labelString(m)] = value(m)
		}
	}
	return got
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestAzure calls an account served as an Azure OpenAI resource: a deployment's calls are served
// with the api-version and the key in api-key, and refused with a wrong version, the key as a
// bearer token or a deployment it does not have.
func TestAzure(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) {
		o.AzureAPIVersion, o.AzureDeployments = "2024-10-21", map[string]string{"prod-mini": "gpt-4o-mini"}
	})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"max_tokens":5}`
	call := func(path, version, header string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path+"?api-version="+version, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(header, map[string]string{"Api-Key": testKey, "Authorization": "Bearer " + testKey}[header])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, path, version, header string
		want                        int
	}{
		{"a deployment", "/openai/deployments/prod-mini/chat/completions", "2024-10-21", "Api-Key", http.StatusOK},
		{"a model's own deployment", "/openai/deployments/gpt-4o/chat/completions", "2024-10-21", "Api-Key", http.StatusOK},
		{"a bearer token", "/openai/deployments/prod-mini/chat/completions", "2024-10-21", "Authorization", http.StatusUnauthorized},
		{"another api-version", "/openai/deployments/prod-mini/chat/completions", "2023-05-15", "Api-Key", http.StatusBadRequest},
		{"an unknown deployment", "/openai/deployments/nope/chat/completions", "2024-10-21", "Api-Key", http.StatusNotFound},
		{"the OpenAI path", "/v1/chat/completions", "2024-10-21", "Api-Key", http.StatusNotFound},
	} {
		if got := call(tc.path, tc.version, tc.header); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
}
