package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
)

func TestReadAtMost(t *testing.T) {
	tests := []struct {
		name          string
		body          string
		contentLength int64
		want          string
		wantErr       bool
	}{
		{"announced and whole", `{"a":1}`, 7, `{"a":1}`, false},
		{"cut off before its announced end", `{"a":`, 7, `{"a":`, true},
		{"longer than announced", `{"a":1}xx`, 7, `{"a":1}xx`, false},
		{"no length announced", `{"a":1}`, -1, `{"a":1}`, false},
		{"over the bound", strings.Repeat("x", 20), -1, strings.Repeat("x", 16), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{ContentLength: tc.contentLength, Body: io.NopCloser(strings.NewReader(tc.body))}
			got, err := readAtMost(resp.Body, resp.ContentLength, 16)
			if string(got) != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("readAtMost = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestProviderTransportPoolFollowsMaxInFlight(t *testing.T) {
	tests := []struct {
		name                  string
		maxInFlight           int64
		wantIdle, wantPerHost int
	}{
		{"capped", 1000, 1000, 1000},
		{"uncapped", 0, idleConnsUncapped, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := providerTransport(&gatewayv1.Provider{MaxInFlight: tc.maxInFlight})
			if tr.MaxIdleConns != tc.wantIdle || tr.MaxIdleConnsPerHost != tc.wantIdle || tr.MaxConnsPerHost != tc.wantPerHost {
				t.Errorf("idle %d, idle per host %d, per host %d; want idle %d for both, per host %d",
					tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost, tc.wantIdle, tc.wantPerHost)
			}
		})
	}
}

func TestReportedLimitsReadOpenAIsAndAnthropicsHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   admission.Reported
	}{
		{"none", nil, admission.Reported{}},
		{"limits and some left", map[string]string{
			"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499", "x-ratelimit-reset-requests": "120ms",
			"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "29000", "x-ratelimit-reset-tokens": "2s",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{RequestsPerMinute: 500, TokensPerMinute: 30000}}},
		{"tokens exhausted", map[string]string{
			"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{TokensPerMinute: 30000}, Exhausted: true, Reset: 6 * time.Minute}},
		{"not numbers", map[string]string{"x-ratelimit-limit-requests": "many", "x-ratelimit-limit-tokens": "-3"}, admission.Reported{}},
		{"empty", map[string]string{"x-ratelimit-limit-requests": "", "x-ratelimit-remaining-requests": "", "x-ratelimit-reset-requests": ""}, admission.Reported{}},
		{"Anthropic's input and output tokens and requests", map[string]string{
			"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49", "anthropic-ratelimit-requests-reset": "2026-12-07T10:00:02Z",
			"anthropic-ratelimit-input-tokens-limit": "30000", "anthropic-ratelimit-input-tokens-remaining": "28000", "anthropic-ratelimit-input-tokens-reset": "2026-12-07T10:00:04Z",
			"anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "7000", "anthropic-ratelimit-output-tokens-reset": "2026-12-07T10:00:09Z",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{RequestsPerMinute: 50, InputTokensPerMinute: 30000, OutputTokensPerMinute: 8000}}},
		{"Anthropic's output tokens exhausted, reset an RFC 3339 time", map[string]string{
			"anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "0", "anthropic-ratelimit-output-tokens-reset": "2026-12-07T10:00:09Z",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{OutputTokensPerMinute: 8000}, Exhausted: true, Reset: 9 * time.Second}},
		{"Anthropic's input tokens exhausted, reset past", map[string]string{
			"anthropic-ratelimit-input-tokens-limit": "30000", "anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": "2026-12-07T09:59:59Z",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{InputTokensPerMinute: 30000}, Exhausted: true}},
		{"OpenAI's requests before Anthropic's", map[string]string{
			"x-ratelimit-limit-requests": "500", "anthropic-ratelimit-requests-limit": "50",
		}, admission.Reported{Limits: gatewayv1.LearnedLimits{RequestsPerMinute: 500}}},
	}
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			if got := reportedLimits(h, now); got != tc.want {
				t.Errorf("reportedLimits = %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestPassHeadersKeepsConnectionAndAccountHeadersAtTheGateway(t *testing.T) {
	client := http.Header{"X-Request-Id": {"req_1"}}
	answer := http.Header{
		"Content-Type":               {"application/json"},
		"Connection":                 {"keep-alive, X-Hop"},
		"Keep-Alive":                 {"timeout=5"},
		"X-Hop":                      {"for this connection"},
		"Transfer-Encoding":          {"chunked"},
		"Upgrade":                    {"h2c"},
		"X-Request-Id":               {"req_provider"},
		"X-Ratelimit-Limit-Requests": {"10000"},
		"Openai-Organization":        {"the gateway's"},
	}
	passHeaders(client, answer)
	want := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1", "req_provider"}}
	if diff := cmp.Diff(want, client); diff != "" {
		t.Errorf("the client's headers (-want +got):\n%s", diff)
	}
}

// TestAProviderAnswerBrokenOffReachesTheClientBroken has the provider break off an error answer
// of unknown length in its middle: the client must see its connection break, not an answer that
// looks whole.
func TestAProviderAnswerBrokenOffReachesTheClientBroken(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(provider.Close)
	gateway := httptest.NewServer(newSettleGateway(t, provider.URL).Handler())
	t.Cleanup(gateway.Close)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, gateway.URL+"/v1/chat/completions", strings.NewReader(settleBody))
	req.Header.Set("Authorization", "Bearer "+settleKey)
	resp, err := gateway.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("status %d, body %q, read error %v; want 400 and the body broken off (%v)", resp.StatusCode, body, err, io.ErrUnexpectedEOF)
	}
}

// TestACallGoesWithItsClientsUserAgentOrNone checks the provider receives the client's
// User-Agent, and none, not the gateway's, when the client sent none.
func TestACallGoesWithItsClientsUserAgentOrNone(t *testing.T) {
	agents := make(chan []string, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		agents <- r.Header.Values("User-Agent")
		io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	for _, agent := range []string{"OpenAI/Python 1.99.0", ""} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
		r.Header.Set("Authorization", "Bearer "+settleKey)
		if agent != "" {
			r.Header.Set("User-Agent", agent)
		}
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		want := []string{agent}
		if agent == "" {
			want = nil
		}
		if got := <-agents; !slices.Equal(got, want) {
			t.Errorf("the client sent User-Agent %q; the provider received %q", agent, got)
		}
	}
}

// TestAStreamsHeadersReachTheClientBeforeItsFirstChunk has the provider begin a stream and send
// nothing more until the client has its answer's status and headers: a gateway that held them
// until the first chunk would never pass them on.
func TestAStreamsHeadersReachTheClientBeforeItsFirstChunk(t *testing.T) {
	clientHasHeaders := make(chan struct{})
	heard := make(chan bool, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-clientHasHeaders:
			heard <- true
		case <-time.After(5 * time.Second): // bounds a gateway that holds the headers
			heard <- false
		}
		sendStream(w, "Hello")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Providers[0].StallTimeout.Duration = time.Minute // the provider's wait is not a stall here
	cfg.Providers[0].CallTimeout.Duration = time.Minute
	gateway := httptest.NewServer(newSettleGatewayFrom(t, cfg).Handler())
	t.Cleanup(gateway.Close)
	body := strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, gateway.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+settleKey)
	resp, err := gateway.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(clientHasHeaders)
	if !<-heard {
		t.Error("the client received the stream's headers only with its first chunk")
	}
	if got, _ := io.ReadAll(resp.Body); !strings.Contains(string(got), streamChunk("Hello")) {
		t.Errorf("the stream %q; want it to hold the provider's chunk", got)
	}
}
