package provider

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// anthropicHeaders are the Anthropic rate-limit headers of an answer.
func anthropicHeaders(h http.Header) map[string]string {
	got := map[string]string{}
	for _, k := range []string{"input", "output"} {
		for _, v := range []string{"limit", "remaining", "reset"} {
			name := "anthropic-ratelimit-" + k + "-tokens-" + v
			if s := h.Get(name); s != "" {
				got[name] = s
			}
		}
	}
	return got
}

// refusedFor checks that an answer is a 429 of type typ whose message
// says word, with retry-after (empty for none).
func refusedFor(t *testing.T, resp *http.Response, body []byte, typ, word, retryAfter string) {
	t.Helper()
	e := errorOf(t, body)
	if resp.StatusCode != http.StatusTooManyRequests || e.Type != typ || !strings.Contains(e.Message, word) || resp.Header.Get("retry-after") != retryAfter {
		t.Errorf("answer %d %s, retry-after %q; want 429 of type %s saying %q, retry-after %q", resp.StatusCode, body, resp.Header.Get("retry-after"), typ, word, retryAfter)
	}
}

func TestOutputTokensPerMinute(t *testing.T) {
	// Each call asks for up to 900 tokens and answers 100.
	_, srv, clk := start(t, func(o *Options) { o.OutputTokensPerMinute, o.AnswerTokens = 1000, 100 })
	chat := func(maxTokens string) (*http.Response, []byte) {
		return do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey,
			`{"model":"gpt-4o","max_tokens":`+maxTokens+`,"messages":[{"role":"user","content":"hi"}]}`)
	}
	output := func(remaining, reset string) map[string]string {
		return map[string]string{
			"anthropic-ratelimit-output-tokens-limit": "1000", "anthropic-ratelimit-output-tokens-remaining": remaining,
			"anthropic-ratelimit-output-tokens-reset": reset,
		}
	}

	resp, body := chat("900")
	if diff := cmp.Diff(anthropicHeaders(resp.Header), output("100", "2026-03-01T12:01:00Z")); diff != "" {
		t.Errorf("first call, counted at its cap: headers mismatch (-got +want):\n%s", diff)
	}
	if a := decode[chatAnswer](t, body); a.Usage.CompletionTokens != 100 || a.Choices[0].FinishReason != "stop" {
		t.Errorf("first call: %d completion tokens, finished for %q; want 100, stop", a.Usage.CompletionTokens, a.Choices[0].FinishReason)
	}
	resp, _ = do(t, http.MethodGet, srv.URL+"/v1/models", testKey, "")
	if diff := cmp.Diff(anthropicHeaders(resp.Header), output("900", "2026-03-01T12:01:00Z")); diff != "" {
		t.Errorf("once it ended, counted as made: headers mismatch (-got +want):\n%s", diff)
	}

	clk.SetTime(t0.Add(10 * time.Second))
	if resp, body := chat("900"); resp.StatusCode != http.StatusOK {
		t.Errorf("second call, which fits only once the first is counted as made: %d %s; want 200", resp.StatusCode, body)
	}
	// 200 made; 850 more need 50 of them to expire, the first call's at 60 s.
	resp, body = chat("850")
	refusedFor(t, resp, body, "output_tokens", "output tokens per min (OTPM): Limit 1000, Used 200, Requested 850", "50")
	resp, body = chat("1001")
	refusedFor(t, resp, body, "output_tokens", "Request too large for gpt-4o in organization org-lab on output tokens per min (OTPM)", "")
}

func TestOutputCountsAtItsCapWhileItRuns(t *testing.T) {
	gate := newGate(1)
	p, srv, _ := start(t, func(o *Options) { o.OutputTokensPerMinute, o.AnswerTokens, o.Sleep = 1000, 100, gate.sleep })
	done := make(chan int, 1)
	go func() {
		done <- status(t.Context(), srv.URL, `{"model":"gpt-4o","max_tokens":900,"messages":[{"role":"user","content":"hi"}]}`)
	}()
	receive(t, gate.started, "the call's pause")
	resp, _ := do(t, http.MethodGet, srv.URL+"/v1/models", testKey, "")
	if got := resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"); got != "100" {
		t.Errorf("while the call runs: %s output tokens remain; want 100", got)
	}
	close(gate.open)
	if got := receive(t, done, "the call's answer"); got != http.StatusOK {
		t.Fatalf("call: %d; want 200", got)
	}
	resp, _ = do(t, http.MethodGet, srv.URL+"/v1/models", testKey, "")
	if got := resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"); got != "900" || p.Stats().CompletionTokens != 100 {
		t.Errorf("once it ended: %s output tokens remain, %d billed; want 900 and 100", got, p.Stats().CompletionTokens)
	}
}

func TestInputTokensPerMinute(t *testing.T) {
	prompt := chatOf(t, "gpt-4o", `"max_tokens":16`, transcript(0, 2500)) // 1024 + 11×128 cached when sent again
	tests := []struct {
		name         string
		cachedCounts bool
		wantSecond   int // status
		wantLeft     string
	}{
		{name: "cached reads do not count", wantSecond: http.StatusOK, wantLeft: "432"},
		{name: "unless the account counts them", cachedCounts: true, wantSecond: http.StatusTooManyRequests, wantLeft: "500"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := start(t, func(o *Options) { o.InputTokensPerMinute, o.CachedCountsAsInput = 3000, tc.cachedCounts })
			resp, _ := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, prompt)
			if got := resp.Header.Get("anthropic-ratelimit-input-tokens-remaining"); got != "500" {
				t.Errorf("first call: %s input tokens remain; want 500", got)
			}
			resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, prompt)
			if resp.StatusCode != tc.wantSecond || resp.Header.Get("anthropic-ratelimit-input-tokens-remaining") != tc.wantLeft {
				t.Errorf("second call: %d, %s input tokens remain; want %d, %s (%s)", resp.StatusCode,
					resp.Header.Get("anthropic-ratelimit-input-tokens-remaining"), tc.wantSecond, tc.wantLeft, body)
			}
			if tc.wantSecond == http.StatusTooManyRequests {
				refusedFor(t, resp, body, "input_tokens", "input tokens per min (ITPM): Limit 3000, Used 2500, Requested 2500", "60")
				if st := p.Stats(); st.Rejected429InputTokens != 1 {
					t.Errorf("Stats().Rejected429InputTokens = %d; want 1", st.Rejected429InputTokens)
				}
			}
		})
	}
}

func TestInputTooLarge(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) { o.InputTokensPerMinute = 100 })
	resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, chatOf(t, "gpt-4o", "", transcript(0, 102)))
	refusedFor(t, resp, body, "input_tokens", "Request too large for gpt-4o in organization org-lab on input tokens per min (ITPM): Limit 100, Requested 102", "")
}

func TestRequestsPerDay(t *testing.T) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	p, srv, clk := start(t, func(o *Options) { o.RequestsPerDay = 2 })
	clk.SetTime(time.Date(2026, 3, 7, 23, 59, 30, 0, pacific))
	const page = `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 {
		if got := status(t.Context(), srv.URL, page); got != http.StatusOK {
			t.Fatalf("call %d: %d; want 200", i, got)
		}
	}
	resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, page)
	refusedFor(t, resp, body, "requests_per_day", "on requests per day (RPD). Please try again in 30s.", "30")
	clk.SetTime(time.Date(2026, 3, 8, 0, 0, 0, 0, pacific))
	if got := status(t.Context(), srv.URL, page); got != http.StatusOK {
		t.Errorf("at midnight Pacific time: %d; want 200", got)
	}
	if st := p.Stats(); st.Accepted != 3 || st.Rejected429RequestsPerDay != 1 {
		t.Errorf("Stats() accepted %d, refused for the day %d; want 3 and 1", st.Accepted, st.Rejected429RequestsPerDay)
	}
}

func TestDayTimeZone(t *testing.T) {
	_, srv, clk := start(t, func(o *Options) { o.RequestsPerDay, o.DayTimeZone = 1, "UTC" })
	clk.SetTime(time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC))
	const page = `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	status(t.Context(), srv.URL, page)
	resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, page)
	refusedFor(t, resp, body, "requests_per_day", "requests per day", "3600")
}

func TestAnthropicHeaders(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Options)
		at     time.Duration
		key    string
		status int
		want   map[string]string
	}{{
		name:   "none without limits on input or output tokens",
		key:    testKey,
		status: http.StatusOK,
		want:   map[string]string{},
	}, {
		name:   "input and output, their reset an RFC 3339 time rounded up to the second",
		edit:   func(o *Options) { o.InputTokensPerMinute, o.OutputTokensPerMinute = 50_000, 8000 },
		at:     500 * time.Millisecond,
		key:    testKey,
		status: http.StatusOK,
		want: map[string]string{
			"anthropic-ratelimit-input-tokens-limit": "50000", "anthropic-ratelimit-input-tokens-remaining": "49999",
			"anthropic-ratelimit-input-tokens-reset":  "2026-03-01T12:01:01Z",
			"anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "7984",
			"anthropic-ratelimit-output-tokens-reset": "2026-03-01T12:01:01Z",
		},
	}, {
		name:   "on every answer, one refused for its key among them",
		edit:   func(o *Options) { o.OutputTokensPerMinute = 8000 },
		key:    "sk-wrong",
		status: http.StatusUnauthorized,
		want: map[string]string{
			"anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "8000",
			"anthropic-ratelimit-output-tokens-reset": "2026-03-01T12:00:00Z",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, clk := start(t, tc.edit)
			clk.SetTime(t0.Add(tc.at))
			resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", tc.key,
				`{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("call: %d %s; want %d", resp.StatusCode, body, tc.status)
			}
			if diff := cmp.Diff(anthropicHeaders(resp.Header), tc.want); diff != "" {
				t.Errorf("headers mismatch (-got +want):\n%s", diff)
			}
		})
	}
}
