package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// anthropicRequest is a request to the Anthropic account at url with ctx,
// the test's key in x-api-key and an anthropic-version, and headers set
// after (an empty value removes one).
func anthropicRequest(t *testing.T, ctx context.Context, method, url, body string, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", testKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return req
}

// callAnthropic sends an anthropicRequest; the caller closes the answer's
// body.
func callAnthropic(t *testing.T, ctx context.Context, method, url, body string, headers ...string) *http.Response {
	t.Helper()
	resp, err := client.Do(anthropicRequest(t, ctx, method, url, body, headers...))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// doAnthropic is callAnthropic that reads the whole answer.
func doAnthropic(t *testing.T, method, url, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	resp := callAnthropic(t, t.Context(), method, url, body, headers...)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// messageOf is a Messages body for claude with fields (JSON members,
// comma-separated) and one user message of content.
func messageOf(fields, content string) string {
	if fields != "" {
		fields += ","
	}
	return `{"model":"` + claude + `",` + fields + `"messages":[{"role":"user","content":` + content + `}]}`
}

// wireUsage is a Message's usage as the tests read it.
type wireUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens int64 `json:"output_tokens"`
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// checkError checks that an answer is status, in Anthropic's error body of
// type typ, whose request_id is the answer's request-id.
func checkError(t *testing.T, resp *http.Response, body []byte, status int, typ string) anthropicError {
	t.Helper()
	var e anthropicError
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" ||
		!strings.HasPrefix(e.RequestID, "req_") || e.RequestID != resp.Header.Get("request-id") {
		t.Errorf("answer %d %s (request-id %s); want %d, an error of type %s with its request id", resp.StatusCode, body, resp.Header.Get("request-id"), status, typ)
	}
	return e
}

func TestMessagesErrors(t *testing.T) {
	_, url, _ := startAnthropic(t, nil)
	ok := messageOf(`"max_tokens":10`, `"hi"`)
	tests := []struct {
		name    string
		path    string
		body    string
		headers []string
		status  int
		typ     string
	}{
		{"no key", "/v1/messages", ok, []string{"X-Api-Key", ""}, http.StatusUnauthorized, "authentication_error"},
		{"a wrong key", "/v1/messages", ok, []string{"X-Api-Key", "sk-other"}, http.StatusUnauthorized, "authentication_error"},
		{"no anthropic-version", "/v1/messages", ok, []string{"Anthropic-Version", ""}, http.StatusBadRequest, "invalid_request_error"},
		{"no max_tokens", "/v1/messages", messageOf("", `"hi"`), nil, http.StatusBadRequest, "invalid_request_error"},
		{"a body that is not JSON", "/v1/messages", `{`, nil, http.StatusBadRequest, "invalid_request_error"},
		{"a model not served", "/v1/messages", strings.Replace(ok, claude, "claude-nonesuch", 1), nil, http.StatusNotFound, "not_found_error"},
		{"a path not served", "/v1/complete", ok, nil, http.StatusNotFound, "not_found_error"},
		{"count_tokens for a model not served", "/v1/messages/count_tokens", strings.Replace(ok, claude, "claude-nonesuch", 1), nil, http.StatusNotFound, "not_found_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doAnthropic(t, http.MethodPost, url+tc.path, tc.body, tc.headers...)
			checkError(t, resp, body, tc.status, tc.typ)
		})
	}
	t.Run("the key as a bearer token, as Anthropic's Go SDK sends it", func(t *testing.T) {
		resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", ok, "X-Api-Key", "", "Authorization", "Bearer "+testKey)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("answer %d %s; want 200", resp.StatusCode, body)
		}
	})
}

// limitHeaders are the Anthropic rate-limit headers of an answer that are
// set.
func limitHeaders(h http.Header) map[string]string {
	got := map[string]string{}
	for _, k := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		for _, v := range []string{"limit", "remaining", "reset"} {
			if s := h.Get("anthropic-ratelimit-" + k + "-" + v); s != "" {
				got[k+"-"+v] = s
			}
		}
	}
	return got
}

func TestMessagesHeaders(t *testing.T) {
	_, url, clk := startAnthropic(t, func(o *Options) {
		o.RequestsPerMinute, o.InputTokensPerMinute, o.OutputTokensPerMinute, o.AnswerTokens = 50, 40_000, 8000, 10
	})
	clk.SetTime(t0.Add(500 * time.Millisecond))
	resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":100`, `"Summarise this page."`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d %s; want 200", resp.StatusCode, body)
	}
	// The call counts 5 input tokens, and its 100 output tokens at their cap
	// until it ends: then 10. Resets are rounded up to the second.
	want := map[string]string{
		"requests-limit": "50", "requests-remaining": "49", "requests-reset": "2026-03-01T12:01:01Z",
		"input-tokens-limit": "40000", "input-tokens-remaining": "39995", "input-tokens-reset": "2026-03-01T12:01:01Z",
		"output-tokens-limit": "8000", "output-tokens-remaining": "7900", "output-tokens-reset": "2026-03-01T12:01:01Z",
		"tokens-limit": "48000", "tokens-remaining": "47895", "tokens-reset": "2026-03-01T12:01:01Z",
	}
	if diff := cmp.Diff(limitHeaders(resp.Header), want); diff != "" {
		t.Errorf("the call's headers mismatch (-got +want):\n%s", diff)
	}
	first := resp.Header.Get("request-id")

	resp, body = doAnthropic(t, http.MethodGet, url+"/v1/models", "", "X-Api-Key", "")
	checkError(t, resp, body, http.StatusUnauthorized, "authentication_error")
	want["output-tokens-remaining"], want["tokens-remaining"] = "7990", "47985"
	if diff := cmp.Diff(limitHeaders(resp.Header), want); diff != "" {
		t.Errorf("an error's headers, once the call has ended, mismatch (-got +want):\n%s", diff)
	}
	if resp.Header.Get("request-id") == first || resp.Header.Get("x-ratelimit-limit-requests") != "" {
		t.Errorf("answers carry request ids %s and %s, and x-ratelimit-limit-requests %q; want two ids and none of OpenAI's headers",
			first, resp.Header.Get("request-id"), resp.Header.Get("x-ratelimit-limit-requests"))
	}
}

func TestMessagesLimits(t *testing.T) {
	const system = `"system":[{"type":"text","text":"` // 1,250 tokens, cached for five minutes
	cached := system + strings.Repeat("abcd", 1250) + `","cache_control":{"type":"ephemeral"}}]`

	t.Run("requests a minute", func(t *testing.T) {
		p, url, clk := startAnthropic(t, func(o *Options) { o.RequestsPerMinute = 2 })
		for range 2 {
			doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"hi"`))
		}
		clk.SetTime(t0.Add(15 * time.Second))
		resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"hi"`))
		e := checkError(t, resp, body, http.StatusTooManyRequests, "rate_limit_error")
		if resp.Header.Get("retry-after") != "45" || resp.Header.Get("anthropic-ratelimit-requests-remaining") != "0" || !strings.Contains(e.Error.Message, "2 requests per minute") {
			t.Errorf("third call: retry-after %q, %s requests left, %q; want 45, 0, and the limit named",
				resp.Header.Get("retry-after"), resp.Header.Get("anthropic-ratelimit-requests-remaining"), e.Error.Message)
		}
		if st := p.Stats(); st.Accepted != 2 || st.Rejected429Requests != 1 {
			t.Errorf("Stats() = %+v; want 2 accepted, 1 refused for requests", st)
		}
	})

	t.Run("input tokens a minute: what the cache writes counts, what it reads does not", func(t *testing.T) {
		p, url, clk := startAnthropic(t, func(o *Options) { o.InputTokensPerMinute = 2000 })
		remaining := func(resp *http.Response) string { return resp.Header.Get("anthropic-ratelimit-input-tokens-remaining") }
		resp, _ := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10,`+cached, `"Summarise this page."`))
		if remaining(resp) != "745" { // 1,250 written and 5
			t.Errorf("after the call that writes the cache: %s input tokens left; want 745", remaining(resp))
		}
		clk.SetTime(t0.Add(20 * time.Second))
		resp, _ = doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10,`+cached, `"Summarise this page."`))
		if remaining(resp) != "740" { // 1,250 read, and 5
			t.Errorf("after the call that reads the cache: %s input tokens left; want 740", remaining(resp))
		}
		resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"`+strings.Repeat("wxyz", 1000)+`"`))
		e := checkError(t, resp, body, http.StatusTooManyRequests, "rate_limit_error")
		if resp.Header.Get("retry-after") != "40" || !strings.Contains(e.Error.Message, "2000 input tokens per minute") {
			t.Errorf("a call of 1,000 tokens more: retry-after %q, %q; want 40 s, until the first call's expire, and the limit named", resp.Header.Get("retry-after"), e.Error.Message)
		}
		resp, body = doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"`+strings.Repeat("wxyz", 2001)+`"`))
		checkError(t, resp, body, http.StatusTooManyRequests, "rate_limit_error")
		if resp.Header.Get("retry-after") != "" {
			t.Errorf("a call larger than the minute: retry-after %q; want none, as it never fits", resp.Header.Get("retry-after"))
		}
		if st := p.Stats(); st.Rejected429InputTokens != 2 {
			t.Errorf("Stats() = %+v; want 2 refused for input tokens", st)
		}
	})

	t.Run("output tokens a minute: max_tokens while it runs, what it made once it ends", func(t *testing.T) {
		p, url, clk := startAnthropic(t, func(o *Options) { o.OutputTokensPerMinute, o.AnswerTokens = 100, 10 })
		resp, _ := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":90`, `"hi"`))
		if got := resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"); got != "10" {
			t.Errorf("as the call is admitted: %s output tokens left; want 10", got)
		}
		clk.SetTime(t0.Add(10 * time.Second))
		if resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":90`, `"hi"`)); resp.StatusCode != http.StatusOK {
			t.Errorf("a second call, which fits once the first counts the 10 it made: %d %s; want 200", resp.StatusCode, body)
		}
		resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":81`, `"hi"`))
		checkError(t, resp, body, http.StatusTooManyRequests, "rate_limit_error")
		if resp.Header.Get("retry-after") != "50" {
			t.Errorf("a call of 81 with 20 made: retry-after %q; want 50, until the first call's expire", resp.Header.Get("retry-after"))
		}
		if st := p.Stats(); st.Rejected429OutputTokens != 1 || st.CompletionTokens != 20 {
			t.Errorf("Stats() = %+v; want 1 refused for output tokens, 20 made", st)
		}
	})
}

func TestMessagesOverloaded(t *testing.T) {
	gate := newGate(1)
	p, url, _ := startAnthropic(t, func(o *Options) { o.MaxInFlight, o.Sleep = 1, gate.sleep })
	done := make(chan int, 1)
	go func() {
		resp := callAnthropic(t, t.Context(), http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"hi"`))
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	receive(t, gate.started, "the first call's pause")
	resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"hi"`))
	checkError(t, resp, body, 529, "overloaded_error")
	close(gate.open)
	if got := receive(t, done, "the first call's answer"); got != http.StatusOK {
		t.Errorf("first call: %d; want 200", got)
	}
	if st := p.Stats(); st.Accepted != 1 || st.Rejected503 != 1 {
		t.Errorf("Stats() = %+v; want 1 accepted, 1 refused as overloaded", st)
	}
}

func TestMessagesBillEachClass(t *testing.T) {
	p, url, clk := startAnthropic(t, nil)
	// An hour's breakpoint after 1,250 tokens of system, five minutes' after
	// 1,000 more, and 5 tokens after: 2,255 tokens; 10 tokens in answer.
	body := `{"model":"` + claude + `","max_tokens":10,` +
		`"system":[{"type":"text","text":"` + strings.Repeat("abcd", 1250) + `","cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("efgh", 1000) + `","cache_control":{"type":"ephemeral"}},` +
		`{"type":"text","text":"Summarise this page."}]}]}`
	// At $3 a million in and out: $3.75 written for five minutes, $6 for an
	// hour, $0.30 read.
	tests := []struct {
		name        string
		at          time.Duration
		read        int64
		written5m   int64
		written1h   int64
		wantMicros  int64
		wantMessage string
	}{
		{name: "first seen: both written", at: 0, written5m: 1000, written1h: 1250, wantMicros: 5*3 + 1000*15/4 + 1250*6 + 10*3},
		{name: "ten minutes on: the hour's read, the rest written again", at: 10 * time.Minute, read: 1250, written5m: 1000, wantMicros: 5*3 + 1250*3/10 + 1000*15/4 + 10*3},
		{name: "at once again: all read", at: 10 * time.Minute, read: 2250, wantMicros: 5*3 + 2250*3/10 + 10*3},
	}
	var all Bill
	for _, tc := range tests {
		clk.SetTime(t0.Add(tc.at))
		resp, data := doAnthropic(t, http.MethodPost, url+"/v1/messages", body)
		var m struct {
			Usage wireUsage `json:"usage"`
		}
		if err := json.Unmarshal(data, &m); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, data)
		}
		u := m.Usage
		got := []int64{u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.CacheCreation.Ephemeral5m, u.CacheCreation.Ephemeral1h, u.OutputTokens}
		want := []int64{5, tc.read, tc.written5m + tc.written1h, tc.written5m, tc.written1h, 10}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("%s: input, read, written, for 5 m, for 1 h, output mismatch (-got +want):\n%s", tc.name, diff)
		}
		all.add(Bill{InputTokens: 2255, CachedInputTokens: tc.read, CacheWrite5mInputTokens: tc.written5m, CacheWrite1hInputTokens: tc.written1h, OutputTokens: 10, MicroDollars: tc.wantMicros})
	}
	st := p.Stats()
	got := Bill{InputTokens: st.PromptTokens, CachedInputTokens: st.CachedPromptTokens, CacheWrite5mInputTokens: st.CacheWrite5mPromptTokens,
		CacheWrite1hInputTokens: st.CacheWrite1hPromptTokens, OutputTokens: st.CompletionTokens, MicroDollars: st.MicroDollars}
	if diff := cmp.Diff(got, all); diff != "" {
		t.Errorf("Stats() by class mismatch (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(st.Tiers.Default, all); diff != "" {
		t.Errorf("Stats().Tiers.Default mismatch (-got +want):\n%s", diff)
	}
}

func TestMessagesPricesAreOptions(t *testing.T) {
	p, url, _ := startAnthropic(t, func(o *Options) {
		o.InputMicrosPerMillion, o.OutputMicrosPerMillion, o.CacheWriteInputMicrosPerMillion = 1_000_000, 5_000_000, 2_000_000
	})
	doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10,"system":[{"type":"text","text":"`+strings.Repeat("abcd", 1250)+`","cache_control":{"type":"ephemeral"}}]`, `"hi"`))
	if got, want := p.Stats().MicroDollars, int64(1*1+1250*2+10*5); got != want {
		t.Errorf("a call of 1 token in, 1,250 written and 10 out costs %d micro-dollars; want %d", got, want)
	}
}

// anthropicEvent is a server-sent event of a Messages stream as the tests
// read it.
type anthropicEvent struct {
	name  string
	Type  string `json:"type"`
	Delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

// readEvents reads a Messages stream from r until it ends, or until stop
// says so of the events read.
func readEvents(t *testing.T, r io.Reader, stop func([]anthropicEvent) bool) []anthropicEvent {
	t.Helper()
	var evs []anthropicEvent
	var name string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			name = v
			continue
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := anthropicEvent{name: name}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != name {
			t.Errorf("event %s carries %s", name, data)
		}
		if evs = append(evs, ev); stop != nil && stop(evs) {
			break
		}
	}
	return evs
}

func TestMessagesStream(t *testing.T) {
	p, url, _ := startAnthropic(t, nil)
	resp := callAnthropic(t, t.Context(), http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":40,"stream":true`, `"hi"`))
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %s; want events", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var names []string
	var text strings.Builder
	for _, ev := range readEvents(t, resp.Body, nil) {
		names = append(names, ev.name)
		text.WriteString(ev.Delta.Text)
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(names, want); diff != "" {
		t.Errorf("events mismatch (-got +want):\n%s", diff)
	}
	if text.Len() != 160 || p.Stats().CompletionTokens != 40 {
		t.Errorf("streamed %d bytes of text, billed %d tokens; want 160 bytes, 40 tokens", text.Len(), p.Stats().CompletionTokens)
	}
}

func TestMessagesClientLeavesBilledForWhatWasMade(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream %t", stream), func(t *testing.T) {
			// 100 tokens in deltas of 16; the pauses before the first three pass.
			pace := newPacer(3)
			p, url, _ := startAnthropic(t, func(o *Options) { o.Sleep, o.OutputTokensPerMinute = pace.sleep, 1000 })
			ctx, cancel := context.WithCancel(t.Context())
			req := anthropicRequest(t, ctx, http.MethodPost, url+"/v1/messages", messageOf(fmt.Sprintf(`"max_tokens":100,"stream":%t`, stream), `"Summarise this page."`))
			answered := make(chan *http.Response, 1)
			go func() {
				resp, _ := client.Do(req) // a JSON call has no answer: its client leaves first
				answered <- resp
			}()
			if stream {
				resp := receive(t, answered, "the stream's start")
				defer resp.Body.Close()
				if evs := readEvents(t, resp.Body, func(evs []anthropicEvent) bool { return len(evs) == 6 }); len(evs) != 6 {
					t.Fatalf("read %d events before leaving; want the start, a ping and three deltas", len(evs))
				}
			}
			receive(t, pace.held, "the fourth pause")
			cancel()
			// 5 in and 48 out, at $3 a million.
			st := waitStats(t, p, func(st Stats) bool { return st.InFlight == 0 })
			want := Bill{InputTokens: 5, OutputTokens: 48, MicroDollars: 5*3 + 48*3}
			got := Bill{InputTokens: st.PromptTokens, OutputTokens: st.CompletionTokens, MicroDollars: st.MicroDollars}
			if diff := cmp.Diff(got, want); diff != "" || st.Canceled != 1 {
				t.Errorf("Stats(): %d canceled, bill mismatch (-got +want):\n%s", st.Canceled, diff)
			}
			resp, _ := doAnthropic(t, http.MethodGet, url+"/v1/models", "")
			if got := resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"); got != "952" {
				t.Errorf("%s output tokens left; want 952, the minute counting the 48 made", got)
			}
		})
	}
}

func TestCountTokens(t *testing.T) {
	p, url, clk := startAnthropic(t, func(o *Options) { o.CountTokensRequestsPerMinute, o.RequestsPerMinute = 1, 50 })
	count := messageOf("", `"Summarise this page."`)
	resp, body := doAnthropic(t, http.MethodPost, url+"/v1/messages/count_tokens", count)
	if strings.TrimSpace(string(body)) != `{"input_tokens":5}` || resp.Header.Get("anthropic-ratelimit-requests-limit") != "1" ||
		resp.Header.Get("anthropic-ratelimit-requests-remaining") != "0" {
		t.Errorf("count_tokens: %d %s, %s of %s requests left; want 5 tokens, 0 of 1, its own limit", resp.StatusCode, body,
			resp.Header.Get("anthropic-ratelimit-requests-remaining"), resp.Header.Get("anthropic-ratelimit-requests-limit"))
	}
	clk.SetTime(t0.Add(20 * time.Second))
	resp, body = doAnthropic(t, http.MethodPost, url+"/v1/messages/count_tokens", count)
	checkError(t, resp, body, http.StatusTooManyRequests, "rate_limit_error")
	if resp.Header.Get("retry-after") != "40" {
		t.Errorf("a second count in the minute: retry-after %q; want 40", resp.Header.Get("retry-after"))
	}
	resp, _ = doAnthropic(t, http.MethodPost, url+"/v1/messages", messageOf(`"max_tokens":10`, `"hi"`))
	if got := resp.Header.Get("anthropic-ratelimit-requests-remaining"); resp.StatusCode != http.StatusOK || got != "49" {
		t.Errorf("a call after two counts: %d, %s requests left; want 200, 49: counts are limited apart", resp.StatusCode, got)
	}
	st := p.Stats()
	if st.Accepted != 1 || st.Rejected429CountTokens != 1 || st.MicroDollars != 10*3+1*3 || st.Received["POST /v1/messages/count_tokens"] != 2 {
		t.Errorf("Stats() = %+v; want the one call billed, counts free, one refused", st)
	}
}
