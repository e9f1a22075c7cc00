package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/test/poll"
)

// The Anthropic table's account: its key, and its prices, a micro-dollar a token of input, a
// tenth of that read from the cache, 1.25 written to it, and five for output, per token.
const (
	claudeModel       = "claude-sonnet-5-5"
	claudeProviderKey = "sk-ant-provider"
)

// claudeBody is a call whose prompt, 16 KB, could hold the usage claudeMessage reports.
var claudeBody = `{"model":"claude-sonnet-5-5","max_tokens":64,"messages":[{"role":"user","content":"` + strings.Repeat("Say hello. ", 1500) + `"}]}`

// claudeMessage is a Message whose usage read 2,048 tokens from the cache and wrote 1,024.
const claudeMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"Hello."}],
"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":1024,"cache_read_input_tokens":2048,"output_tokens":20}}`

// claudeMessageMicros is what claudeMessage costs: 10 × 1 + 2,048 × 0.1 + 1,024 × 1.25 + 20 × 5,
// rounded up once.
const claudeMessageMicros = 10 + 205 + 1280 + 100

// anthropicConfig is the settle table's gateway with an Anthropic provider of claudeModel at
// url, beside its OpenAI provider of "m".
func anthropicConfig(url string) *gatewayv1.Config {
	cfg := settleConfig("http://127.0.0.1:1")
	claude := cfg.Providers[0]
	claude.Name, claude.API, claude.BaseURL, claude.MaxInFlight = "claude", gatewayv1.APIAnthropic, url+"/v1", 0
	claude.Models = []gatewayv1.Model{{Name: claudeModel}}
	claude.Prices = gatewayv1.Prices{InputPerMillion: "1.00", CachedInputPerMillion: "0.10", CacheWritePerMillion: "1.25", OutputPerMillion: "5.00"}
	claude.AnthropicVersion = ""
	cfg.Providers = append(cfg.Providers, claude)
	cfg.Tenants[0].Providers = append(cfg.Tenants[0].Providers, "claude")
	cfg.Default()
	return cfg
}

// newAnthropicGateway is a gateway in front of an Anthropic provider that serve answers, with
// the provider's key.
func newAnthropicGateway(t *testing.T, serve http.HandlerFunc) *settleGateway {
	t.Helper()
	provider := httptest.NewServer(serve)
	t.Cleanup(provider.Close)
	g := newSettleGatewayFrom(t, anthropicConfig(provider.URL))
	g.policy.Provider("claude").APIKey = claudeProviderKey
	return g
}

// anthropicCall sends a Messages call to g at path with headers, and returns the recorded answer.
func anthropicCall(g *settleGateway, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for name, value := range headers {
		r.Header.Set(name, value)
	}
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	return w
}

// anthropicErrorOf reads Anthropic's error body, failing the test when w does not hold one.
func anthropicErrorOf(t *testing.T, w *httptest.ResponseRecorder) anthropicError {
	t.Helper()
	var e anthropicError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("the answer is not Anthropic's error body: %d %s", w.Code, w.Body)
	}
	if e.RequestID == "" || e.RequestID != w.Header().Get("Request-Id") {
		t.Errorf("request_id %q, request-id header %q; want one id in both", e.RequestID, w.Header().Get("Request-Id"))
	}
	return e
}

// spentMicros is what acme has been charged this period.
func spentMicros(t *testing.T, g *settleGateway) int64 {
	t.Helper()
	for _, u := range g.gate.Usage(t.Context()).Tenants {
		if u.Name == "acme" {
			micros, err := u.SpendThisPeriod.MicroDollars()
			if err != nil {
				t.Fatal(err)
			}
			return micros
		}
	}
	return 0
}

// TestTheGatewaysErrorsAreAnthropicsToAMessagesClient checks that the gateway's own errors reach a
// client of the Messages API in Anthropic's error body, of the type its status has there, with
// request-id, and x-should-retry: false where no retry helps.
func TestTheGatewaysErrorsAreAnthropicsToAMessagesClient(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("the provider was called: %s", r.URL) })
	key := map[string]string{"X-Api-Key": settleKey}
	tests := []struct {
		name, path, body string
		headers          map[string]string
		wantStatus       int
		wantType         string
		wantNoRetry      bool
	}{
		{"no key", "/v1/messages", claudeBody, nil, 401, "authentication_error", true},
		{"a wrong key", "/v1/messages", claudeBody, map[string]string{"X-Api-Key": "sk-nobody"}, 401, "authentication_error", true},
		{"two keys", "/v1/messages", claudeBody, map[string]string{"X-Api-Key": settleKey, "Authorization": "Bearer sk-someone-else"}, 401, "authentication_error", true},
		{"no max_tokens", "/v1/messages", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"x"}]}`, key, 400, "invalid_request_error", true},
		{"a repeated key", "/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":1,"max_tokens":99999,"messages":[{"role":"user","content":"x"}]}`, key, 400, "invalid_request_error", true},
		{"an unknown model", "/v1/messages", strings.Replace(claudeBody, claudeModel, "claude-nothing", 1), key, 404, "not_found_error", true},
		{"an OpenAI model", "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, key, 400, "invalid_request_error", true},
		{"an unknown path", "/v1/messages/batches", `{}`, key, 404, "not_found_error", true},
		{"JSON in another charset", "/v1/messages", claudeBody, map[string]string{"X-Api-Key": settleKey, "Content-Type": "application/json; charset=utf-7"}, 415, "invalid_request_error", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := anthropicCall(g, tc.path, tc.body, tc.headers)
			e := anthropicErrorOf(t, w)
			if w.Code != tc.wantStatus || e.Error.Type != tc.wantType {
				t.Errorf("%d %s; want %d %s", w.Code, e.Error.Type, tc.wantStatus, tc.wantType)
			}
			if got := w.Header().Get("X-Should-Retry") == "false"; got != tc.wantNoRetry {
				t.Errorf("x-should-retry: %q; want false: %v", w.Header().Get("X-Should-Retry"), tc.wantNoRetry)
			}
		})
	}
}

func TestAnthropicType(t *testing.T) {
	for status, want := range map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		408: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
		502: "api_error", 503: "overloaded_error", 504: "api_error", 529: "overloaded_error",
	} {
		if got := anthropicType(&apiError{status: status}); got != want {
			t.Errorf("anthropicType(%d) = %q; want %q", status, got, want)
		}
	}
}

// TestAnOpenAICallToAClaudeModelIsRefused checks that the gateway translates neither API: a chat
// call to a model of an Anthropic provider is refused in OpenAI's error body.
func TestAnOpenAICallToAClaudeModelIsRefused(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("the provider was called: %s", r.URL) })
	w := anthropicCall(g, "/v1/chat/completions", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"x"}]}`,
		map[string]string{"Authorization": "Bearer " + settleKey})
	if w.Code != http.StatusBadRequest || errorCode(t, w) != "wrong_api" || !strings.Contains(w.Body.String(), "/v1/messages") {
		t.Errorf("%d %s; want 400 wrong_api naming /v1/messages", w.Code, w.Body)
	}
}

// TestAMessagesCallGoesWithAnthropicsHeadersAndIsChargedItsUsage checks what an Anthropic
// provider receives (its own key in x-api-key, the client's anthropic-version and -beta, or the
// default version, and no client key), and that the call is charged its usage by class, with the
// tenant's limits in Anthropic's headers and the provider's request-id.
func TestAMessagesCallGoesWithAnthropicsHeadersAndIsChargedItsUsage(t *testing.T) {
	var got http.Header
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if r.URL.Path != "/v1/messages" {
			t.Errorf("the provider was called at %s; want /v1/messages", r.URL.Path)
		}
		w.Header().Set("Request-Id", "req_provider")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "7")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, claudeMessage)
	})
	tests := []struct {
		name        string
		headers     map[string]string
		wantVersion string
		wantBeta    string
	}{
		{"the client's version and beta", map[string]string{"X-Api-Key": settleKey, "Anthropic-Version": "2023-01-01", "Anthropic-Beta": "files-api-2025-04-14"}, "2023-01-01", "files-api-2025-04-14"},
		{"the default version, and a bearer key", map[string]string{"Authorization": "Bearer " + settleKey}, gatewayv1.DefaultAnthropicVersion, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := spentMicros(t, g)
			w := anthropicCall(g, "/v1/messages", claudeBody, tc.headers)
			if w.Code != http.StatusOK || w.Body.String() != claudeMessage {
				t.Fatalf("%d %s; want the provider's message", w.Code, w.Body)
			}
			if got.Get("X-Api-Key") != claudeProviderKey || got.Get("Authorization") != "" {
				t.Errorf("the provider got x-api-key %q, authorization %q; want its own key alone", got.Get("X-Api-Key"), got.Get("Authorization"))
			}
			if got.Get("Anthropic-Version") != tc.wantVersion || got.Get("Anthropic-Beta") != tc.wantBeta {
				t.Errorf("the provider got anthropic-version %q, anthropic-beta %q; want %q, %q", got.Get("Anthropic-Version"), got.Get("Anthropic-Beta"), tc.wantVersion, tc.wantBeta)
			}
			if charged := spentMicros(t, g) - before; charged != claudeMessageMicros {
				t.Errorf("charged %d micro-dollars; want %d", charged, claudeMessageMicros)
			}
			h := w.Header()
			if h.Get("Request-Id") != "req_provider" || h.Get("Anthropic-Ratelimit-Requests-Remaining") == "7" {
				t.Errorf("request-id %q, requests remaining %q; want the provider's id and the tenant's own limits", h.Get("Request-Id"), h.Get("Anthropic-Ratelimit-Requests-Remaining"))
			}
			if h.Get("Anthropic-Ratelimit-Tokens-Limit") != fmt.Sprint(settleTokensPerDay) || h.Get("X-Ratelimit-Limit-Tokens") != "" {
				t.Errorf("tokens limit %q, OpenAI's %q; want the tenant's %d in Anthropic's name alone", h.Get("Anthropic-Ratelimit-Tokens-Limit"), h.Get("X-Ratelimit-Limit-Tokens"), settleTokensPerDay)
			}
			if _, err := time.Parse(time.RFC3339, h.Get("Anthropic-Ratelimit-Tokens-Reset")); err != nil {
				t.Errorf("tokens reset %q; want an RFC 3339 time", h.Get("Anthropic-Ratelimit-Tokens-Reset"))
			}
		})
	}
}

// TestAMessagesStreamIsRelayedAndSettledFromItsEvents checks that a stream passes through as it
// came and is charged the usage of its message_start and message_delta.
func TestAMessagesStreamIsRelayedAndSettledFromItsEvents(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, anthropicStreamAnswer)
	})
	w := anthropicCall(g, "/v1/messages", strings.Replace(claudeBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1), map[string]string{"X-Api-Key": settleKey})
	if w.Code != http.StatusOK || w.Body.String() != anthropicStreamAnswer {
		t.Fatalf("%d %q; want the provider's stream as it came", w.Code, w.Body)
	}
	// 10 + 2,048 × 0.1 + 1,024 × 1.25 + 42 × 5.
	if got, want := spentMicros(t, g), int64(10+205+1280+210); got != want {
		t.Errorf("charged %d micro-dollars; want %d", got, want)
	}
}

// anthropicStreamAnswer is a streamed message whose message_start reports its prompt and whose
// message_delta reports 42 output tokens.
const anthropicStreamAnswer = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-5-5","usage":{"input_tokens":10,"cache_creation_input_tokens":1024,"cache_read_input_tokens":2048,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\n" + `data: {"type":"ping"}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// TestAnthropicsOverloadIsRetriedAndCountedApart checks that a 529 is retried, counted in its
// own series, and does not pause the provider as a throttle would: the next call goes at once.
func TestAnthropicsOverloadIsRetriedAndCountedApart(t *testing.T) {
	var calls atomic.Int64
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "600") // not waited for: a 529 is retried with jitter
			w.WriteHeader(statusOverloaded)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, claudeMessage)
	})
	claude := g.policy.Provider("claude").Config
	claude.Retry.MaxAttempts, claude.Retry.BaseDelay.Duration = 2, time.Millisecond
	for range 2 {
		if w := anthropicCall(g, "/v1/messages", claudeBody, map[string]string{"X-Api-Key": settleKey}); w.Code != http.StatusOK {
			t.Fatalf("%d %s; want the retry's 200", w.Code, w.Body)
		}
	}
	if got := testutil.ToFloat64(g.metrics.providerOverloaded.WithLabelValues("claude")); got != 1 {
		t.Errorf("sluice_gateway_provider_overloaded_total = %v; want 1", got)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("the provider was called %d times; want 3", got)
	}
}

// TestAnAccountWithoutCreditIsNotTheClientsError checks that Anthropic's refusal of an account
// whose credit is spent is answered as the gateway's own error, not retried, and not charged.
func TestAnAccountWithoutCreditIsNotTheClientsError(t *testing.T) {
	var calls atomic.Int64
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_1"}`)
	})
	w := anthropicCall(g, "/v1/messages", claudeBody, map[string]string{"X-Api-Key": settleKey})
	e := anthropicErrorOf(t, w)
	if w.Code != http.StatusBadGateway || e.Error.Type != "api_error" || strings.Contains(e.Error.Message, "Plans & Billing") {
		t.Errorf("%d %s %q; want 502 api_error, the gateway's own message", w.Code, e.Error.Type, e.Error.Message)
	}
	if w.Header().Get("X-Should-Retry") != "false" || calls.Load() != 1 || spentMicros(t, g) != 0 {
		t.Errorf("x-should-retry %q, %d calls, %d charged; want false, 1, 0", w.Header().Get("X-Should-Retry"), calls.Load(), spentMicros(t, g))
	}
}

// TestCountTokensIsFree checks that count_tokens reaches the provider checked and is charged
// nothing.
func TestCountTokensIsFree(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages/count_tokens" {
			t.Errorf("the provider was called at %s", r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":12}`)
	})
	w := anthropicCall(g, "/v1/messages/count_tokens", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"Say hello."}]}`, map[string]string{"X-Api-Key": settleKey})
	if w.Code != http.StatusOK || w.Body.String() != `{"input_tokens":12}` || spentMicros(t, g) != 0 {
		t.Errorf("%d %s, charged %d; want the count, free", w.Code, w.Body, spentMicros(t, g))
	}
	if got := planEndpoint(estimate.CountTokens); got != gatewayv1.EndpointMessages {
		t.Errorf("count_tokens counts under the plan's %q limits; want messages", got)
	}
}

// TestACountTokensRefusalIsNoThrottleOfTheAccount has the provider refuse a count_tokens call
// on its own limit of counting, one a minute, spent: its 429 passes to the client as Anthropic's
// rate_limit_error, but teaches nothing of the account's Messages limits and pauses none of its
// calls, and a Messages call after it goes.
func TestACountTokensRefusalIsNoThrottleOfTheAccount(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages/count_tokens" {
			h := w.Header()
			h.Set("Anthropic-Ratelimit-Requests-Limit", "1")
			h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
			h.Set("Anthropic-Ratelimit-Requests-Reset", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			h.Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 1 token counting requests per minute."}}`)
			return
		}
		io.WriteString(w, claudeMessage)
	})
	key := map[string]string{"X-Api-Key": settleKey}

	w := anthropicCall(g, "/v1/messages/count_tokens", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"Say hello."}]}`, key)
	var e anthropicError
	if json.Unmarshal(w.Body.Bytes(), &e) != nil || w.Code != http.StatusTooManyRequests || e.Error.Type != "rate_limit_error" {
		t.Errorf("count_tokens answered %d %s; want the provider's 429 rate_limit_error", w.Code, w.Body)
	}
	for _, p := range g.gate.Usage(t.Context()).Providers {
		if p.Throttles != 0 {
			t.Errorf("the provider %s counts %d throttles; want none from counting", p.Name, p.Throttles)
		}
	}
	if learned := g.Learned(); len(learned) != 0 {
		t.Errorf("learned %v from a count_tokens answer; want nothing", learned)
	}
	if w := anthropicCall(g, messagesPath, claudeBody, key); w.Code != http.StatusOK {
		t.Errorf("a Messages call after it answered %d %s; want 200", w.Code, w.Body)
	}
}

// TestCountTokensTakesNoneOfTheAccountsRequests gives the Anthropic account one request a
// minute and spends it on a Messages call: a count_tokens call after it still goes at once, as
// Anthropic limits counting apart.
func TestCountTokensTakesNoneOfTheAccountsRequests(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages/count_tokens" {
			io.WriteString(w, `{"input_tokens":12}`)
			return
		}
		io.WriteString(w, claudeMessage)
	}))
	t.Cleanup(provider.Close)
	cfg := anthropicConfig(provider.URL)
	cfg.Providers[1].RequestsPerMinute, cfg.Providers[1].HeadroomPercent = 1, 100
	g := newSettleGatewayFrom(t, cfg)
	key := map[string]string{"X-Api-Key": settleKey}

	if w := anthropicCall(g, messagesPath, claudeBody, key); w.Code != http.StatusOK {
		t.Fatalf("the Messages call answered %d %s; want 200", w.Code, w.Body)
	}
	w := anthropicCall(g, "/v1/messages/count_tokens", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"Say hello."}]}`, key)
	if wait := w.Header().Get("X-Sluice-Queue-Wait-Ms"); w.Code != http.StatusOK || (wait != "" && wait != "0") {
		t.Errorf("count_tokens after it answered %d %s, queued %q ms; want the count at once", w.Code, w.Body, w.Header().Get("X-Sluice-Queue-Wait-Ms"))
	}
}

// TestAKeyInXAPIKeyIsTheCallersAndTwoKeysAreNone checks that a key in x-api-key authenticates
// as a bearer key does, and that two keys that differ, or two x-api-key headers, are refused.
func TestAKeyInXAPIKeyIsTheCallersAndTwoKeysAreNone(t *testing.T) {
	g := newSettleGateway(t, "http://127.0.0.1:1")
	tests := []struct {
		name       string
		headers    http.Header
		wantStatus int
	}{
		{"x-api-key", http.Header{"X-Api-Key": {settleKey}}, http.StatusOK},
		{"both, the same key", http.Header{"X-Api-Key": {settleKey}, "Authorization": {"Bearer " + settleKey}}, http.StatusOK},
		{"both, different keys", http.Header{"X-Api-Key": {"sk-someone-else"}, "Authorization": {"Bearer " + settleKey}}, http.StatusUnauthorized},
		{"x-api-key and another scheme", http.Header{"X-Api-Key": {settleKey}, "Authorization": {"Basic " + settleKey}}, http.StatusUnauthorized},
		{"two x-api-key", http.Header{"X-Api-Key": {settleKey, settleKey}}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
			r.Header = tc.headers
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, r)
			if w.Code != tc.wantStatus {
				t.Errorf("%d %s; want %d", w.Code, w.Body, tc.wantStatus)
			}
		})
	}
}

// TestAMessagesAnswerCarriesTheTenantsInputAndOutputLimits checks that a plan's limits on input
// and output tokens reach a Messages client under Anthropic's names, what remains after the
// call's estimate, and an OpenAI client in the x-ratelimit form.
func TestAMessagesAnswerCarriesTheTenantsInputAndOutputLimits(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages" {
			io.WriteString(w, claudeMessage)
			return
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := anthropicConfig(provider.URL)
	cfg.Providers[0].BaseURL = provider.URL + "/v1"
	cfg.Tenants[0].PerTenant = append(cfg.Tenants[0].PerTenant,
		gatewayv1.Limit{Dimension: gatewayv1.DimensionInputTokens, Amount: 100_000, Per: gatewayv1.PeriodMinute},
		gatewayv1.Limit{Dimension: gatewayv1.DimensionOutputTokens, Amount: 20_000, Per: gatewayv1.PeriodMinute})
	cfg.Default()
	g := newSettleGatewayFrom(t, cfg)
	tests := []struct {
		name, path, body, key string
		input, output         dimensionHeaders
	}{
		{"Messages", "/v1/messages", claudeBody, "X-Api-Key", anthropicInputTokens, anthropicOutputTokens},
		{"chat", "/v1/chat/completions", settleBody, "Authorization", inputTokensHeaders, outputTokensHeaders},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := settleKey
			if tc.key == "Authorization" {
				key = "Bearer " + settleKey
			}
			w := anthropicCall(g, tc.path, tc.body, map[string]string{tc.key: key})
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s; want 200", w.Code, w.Body)
			}
			for _, l := range []struct {
				names dimensionHeaders
				limit int64
			}{{tc.input, 100_000}, {tc.output, 20_000}} {
				h := w.Header()
				remaining, err := strconv.ParseInt(h.Get(l.names.remaining), 10, 64)
				if h.Get(l.names.limit) != fmt.Sprint(l.limit) || err != nil || remaining <= 0 || remaining >= l.limit || h.Get(l.names.reset) == "" {
					t.Errorf("%s %q, %s %q, %s %q; want %d, less after the call, and a reset", l.names.limit, h.Get(l.names.limit),
						l.names.remaining, h.Get(l.names.remaining), l.names.reset, h.Get(l.names.reset), l.limit)
				}
			}
		})
	}
}

// TestAMessagesStreamItsClientLeavesIsChargedWhatWasMade has a client leave a stream once its
// first text has arrived: the call is charged the prompt its message_start reported, by class,
// and the output its deltas carried, 16 bytes of text, four tokens by the proxy.
func TestAMessagesStreamItsClientLeavesIsChargedWhatWasMade(t *testing.T) {
	g := newAnthropicGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, anthropicStreamStart)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	api := httptest.NewServer(g.Handler())
	t.Cleanup(api.Close)
	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	body := strings.Replace(claudeBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", settleKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && !strings.Contains(lines.Text(), "text_delta") {
	}
	leave()
	resp.Body.Close()

	closed := g.metrics.requests.WithLabelValues("acme", "claude", outcomeClientClosed)
	poll.Until(t, 10*time.Second, "the call to end client_closed", func() bool { return testutil.ToFloat64(closed) == 1 })
	// 10 + 2,048 × 0.1 + 1,024 × 1.25 + 4 × 5.
	if got, want := spentMicros(t, g), int64(10+205+1280+20); got != want {
		t.Errorf("charged %d micro-dollars; want %d", got, want)
	}
}

// anthropicStreamStart is the start of a streamed message: its message_start, which reports its
// prompt, and a delta of 16 bytes of text.
const anthropicStreamStart = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-5-5","usage":{"input_tokens":10,"cache_creation_input_tokens":1024,"cache_read_input_tokens":2048,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefghijklmnop"}}` + "\n\n"

// TestAMessagesStreamThatWaitsInTheQueueEndsInAnthropicsEvents queues a Messages stream behind a
// call that holds the provider's only slot until its client has had a keepalive: what the
// provider answers after goes in the stream as Anthropic's SDK reads it, an answer as its events
// and a refusal as Anthropic's error event, which the SDK raises.
func TestAMessagesStreamThatWaitsInTheQueueEndsInAnthropicsEvents(t *testing.T) {
	tests := []struct {
		name   string
		answer http.HandlerFunc
		check  func(t *testing.T, text string, err error)
	}{{
		name: "answered",
		answer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, anthropicStreamStart+anthropicStreamEnd)
		},
		check: func(t *testing.T, text string, err error) {
			if err != nil || text != "abcdefghijklmnop" {
				t.Errorf("the SDK read %q and %v; want the provider's text and no error", text, err)
			}
		},
	}, {
		name: "refused by the provider",
		answer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "{\"type\": \"error\",\n \"error\": {\"type\": \"invalid_request_error\", \"message\": \"temperature: out of range\"}}")
		},
		check: func(t *testing.T, text string, err error) {
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.Type() != "invalid_request_error" || !strings.Contains(apiErr.Error(), "temperature: out of range") || text != "" {
				t.Errorf("the SDK read %q and %v; want the provider's invalid_request_error raised from the stream", text, err)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held, release := make(chan struct{}), make(chan struct{})
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if !bytes.Contains(body, []byte(`"stream":true`)) { // the call that holds the slot
					close(held)
					<-release
					io.WriteString(w, claudeMessage)
					return
				}
				tc.answer(w, r)
			}))
			t.Cleanup(provider.Close)
			cfg := anthropicConfig(provider.URL)
			cfg.Providers[1].MaxInFlight = 1
			cfg.Server.StreamKeepalive = metav1.Duration{Duration: 10 * time.Millisecond}
			g := newSettleGatewayFrom(t, cfg)
			api := httptest.NewServer(g.Handler())
			t.Cleanup(api.Close)
			holding := make(chan struct{})
			go func() {
				defer close(holding)
				resp := postMessages(t, api.URL, claudeBody)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
			<-held

			resp := postMessages(t, api.URL, strings.Replace(claudeBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
			defer resp.Body.Close()
			var received bytes.Buffer
			lines := bufio.NewReader(io.TeeReader(resp.Body, &received))
			first, _ := lines.ReadString('\n')
			close(release) // the stream has had its first keepalive: let the call through
			io.Copy(io.Discard, lines)

			if resp.StatusCode != http.StatusOK || first != ": queued\n" {
				t.Errorf("answered %d, beginning %q; want 200 and the queue's keepalive comment", resp.StatusCode, first)
			}
			text, err := readMessagesWithSDK(received.Bytes())
			tc.check(t, text, err)
			<-holding
		})
	}
}

// anthropicStreamEnd ends anthropicStreamStart: its block, its usage and its stop.
const anthropicStreamEnd = "event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// postMessages sends a Messages call of body to the gateway at url as the settle table's key,
// and returns its answer as it begins.
func postMessages(t *testing.T, url, body string) *http.Response {
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+messagesPath, strings.NewReader(body))
	req.Header.Set("X-Api-Key", settleKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return &http.Response{Body: http.NoBody}
	}
	return resp
}

// readMessagesWithSDK reads a Messages stream as received with Anthropic's Go SDK, and returns
// its text and the error the SDK raised.
func readMessagesWithSDK(received []byte) (string, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(received)), Request: httptest.NewRequest(http.MethodPost, messagesPath, nil)}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(resp), nil)
	var m anthropic.Message
	for stream.Next() {
		if err := m.Accumulate(stream.Current()); err != nil {
			return "", err
		}
	}
	var text strings.Builder
	for _, block := range m.Content {
		text.WriteString(block.Text)
	}
	return text.String(), stream.Err()
}
