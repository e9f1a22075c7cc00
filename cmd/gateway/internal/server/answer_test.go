package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

func TestRefusalError(t *testing.T) {
	tests := []struct {
		name        string
		refusal     admission.Refusal
		wantStatus  int
		wantCode    string
		wantRetry   time.Duration
		wantParam   string
		wantMessage string
		wantHeaders map[string]string
		// weight is how many times the call's provider counts each output token; zero means once.
		weight int32
	}{{
		name: "a limit refuses: Retry-After rounded up, the exact wait in ms, the caller's limits",
		refusal: admission.Refusal{Reason: admission.Limited, Level: ratelimit.LevelUser, Dimension: ratelimit.Requests,
			Capacity: 50, Remaining: 0, Requested: 1, RetryAfter: 1500 * time.Millisecond,
			Limits: admission.Limits{Requests: admission.Headroom{Capacity: 50, Remaining: 0, Reset: time.Hour}}},
		wantStatus: 429, wantCode: "rate_limit_exceeded", wantRetry: 1500 * time.Millisecond,
		wantHeaders: map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500",
			"X-Ratelimit-Limit-Requests": "50", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1h0m0s"},
	}, {
		name: "a plan's calls at once are all running: the limit named as configured, to come back when one ends",
		refusal: admission.Refusal{Reason: admission.Limited, Level: ratelimit.LevelTenant, Dimension: ratelimit.InFlight,
			Capacity: 5, Per: "at once", Remaining: 0, Requested: 1, RetryAfter: time.Second},
		wantStatus: 429, wantCode: "rate_limit_exceeded", wantRetry: time.Second,
		wantMessage: "Too many calls at once: the tenant limit on inFlight: limit 5 at once, remaining 0, requested 1. Try again when one of them ends.",
		wantHeaders: map[string]string{"Retry-After": "1", "Retry-After-Ms": "1000"},
	}, {
		name: "a day's quota is spent: insufficient_quota until its reset, not retried",
		refusal: admission.Refusal{Reason: admission.Limited, Level: ratelimit.LevelUser, Dimension: ratelimit.Requests, Spent: true,
			Capacity: 50, Remaining: 0, Requested: 1, RetryAfter: 19*time.Hour + 37*time.Minute},
		wantStatus: 429, wantCode: "insufficient_quota", wantRetry: 19*time.Hour + 37*time.Minute,
		wantHeaders: map[string]string{"Retry-After": "70620", "Retry-After-Ms": "70620000", "X-Should-Retry": "false"},
	}, {
		name:       "too large: a bad request naming the field and the largest value that fits, never retried",
		refusal:    admission.Refusal{Reason: admission.TooLarge, Level: ratelimit.LevelProvider, Dimension: ratelimit.Tokens, Capacity: 100, Remaining: -1, Requested: 500},
		wantStatus: 400, wantCode: "request_too_large", wantParam: "max_tokens", wantMessage: "The largest max_tokens that fits is 40.",
		wantHeaders: map[string]string{"X-Should-Retry": "false"},
	}, {
		name:       "too large by its prompt alone: the prompt is named",
		refusal:    admission.Refusal{Reason: admission.TooLarge, Level: ratelimit.LevelTenant, Dimension: ratelimit.Tokens, Capacity: 10, Remaining: -1, Requested: 500},
		wantStatus: 400, wantCode: "request_too_large", wantParam: "messages", wantMessage: "Its prompt alone is about 20 tokens.",
		wantHeaders: map[string]string{"X-Should-Retry": "false"},
	}, {
		name:       "too large for a provider's output tokens, each counted five times: the largest max_tokens is a fifth of the room, a call",
		refusal:    admission.Refusal{Reason: admission.TooLarge, Level: ratelimit.LevelProvider, Dimension: ratelimit.OutputTokens, Capacity: 1000, Remaining: -1, Requested: 2400},
		wantStatus: 400, wantCode: "request_too_large", wantParam: "max_tokens", wantMessage: "limit on outputTokens: limit 1000, requested 2400. Waiting will not help; make the request smaller. The largest max_tokens that fits is 100.",
		wantHeaders: map[string]string{"X-Should-Retry": "false"}, weight: 5,
	}, {
		name:       "too large for a plan's input tokens: the prompt is named",
		refusal:    admission.Refusal{Reason: admission.TooLarge, Level: ratelimit.LevelUser, Dimension: ratelimit.InputTokens, Capacity: 1000, Remaining: -1, Requested: 2000},
		wantStatus: 400, wantCode: "request_too_large", wantParam: "messages", wantMessage: "the user limit on inputTokens: limit 1000, requested 2000. Waiting will not help; make the request smaller. Its prompt alone is about 20 tokens.",
		wantHeaders: map[string]string{"X-Should-Retry": "false"}, weight: 5,
	}, {
		name:       "the door: the place in the lane and the estimate",
		refusal:    admission.Refusal{Reason: admission.Busy, Position: 7, Estimate: 90 * time.Second, MaxWait: time.Minute, RetryAfter: 30 * time.Second},
		wantStatus: 429, wantCode: "queue_busy", wantRetry: 30 * time.Second,
		wantHeaders: map[string]string{"Retry-After": "30", "X-Sluice-Queue-Position": "7", "X-Sluice-Queue-Estimate-Ms": "90000"},
	}, {
		name:       "the store is down and the gateway fails closed",
		refusal:    admission.Refusal{Reason: admission.Unavailable, RetryAfter: time.Second},
		wantStatus: 503, wantCode: "limiter_unavailable", wantRetry: time.Second, wantHeaders: map[string]string{"Retry-After": "1"},
	}, {
		name:       "the caller left",
		refusal:    admission.Refusal{Reason: admission.Gone},
		wantStatus: statusClientClosed, wantCode: "client_closed", wantHeaders: map[string]string{"X-Should-Retry": "false"},
	}, {
		name:       "no store could decide",
		refusal:    admission.Refusal{Reason: admission.Failed},
		wantStatus: 500, wantCode: "limiter_error", wantHeaders: map[string]string{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A chat call of 20 prompt tokens and max_tokens 240, twice (n: 2): 500 tokens.
			c := &call{endpoint: estimate.Chat, estimate: estimate.Estimate{PromptTokens: 20, CompletionTokens: 480}, request: &estimate.Request{MaxTokensParam: "max_tokens", N: 2},
				offer: offer{route: &policy.Route{Provider: &policy.Provider{Config: &gatewayv1.Provider{OutputTokenWeight: tc.weight}}}}}
			w := httptest.NewRecorder()
			e := refusalError(w.Header(), c, &tc.refusal)
			if e.status != tc.wantStatus || e.Code != tc.wantCode || e.retryAfter != tc.wantRetry || !strings.Contains(e.Message, tc.wantMessage) {
				t.Errorf("refusalError = status %d, code %q, retry after %s, message %q; want %d, %q, %s and a message with %q",
					e.status, e.Code, e.retryAfter, e.Message, tc.wantStatus, tc.wantCode, tc.wantRetry, tc.wantMessage)
			}
			if got := e.Param; (got == nil) != (tc.wantParam == "") || (got != nil && *got != tc.wantParam) {
				t.Errorf("param = %v; want %q", got, tc.wantParam)
			}
			e.write(w)
			got := map[string]string{}
			for name := range w.Header() {
				if name != "Content-Type" {
					got[name] = w.Header().Get(name)
				}
			}
			if diff := cmp.Diff(tc.wantHeaders, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEveryBusyAnswerSaysWhenToComeBack(t *testing.T) {
	for _, status := range []int{429, 503} {
		w := httptest.NewRecorder()
		(&apiError{status: status, Type: typeRateLimit, Code: "c", Message: "m"}).write(w)
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("%d without a wait: Retry-After %q; want at least a second", status, got)
		}
	}
}

func TestBearerKey(t *testing.T) {
	for _, tc := range []struct {
		header, wantKey string
		wantOK          bool
	}{
		{"Bearer sk-1", "sk-1", true},
		{"bearer sk-1", "sk-1", true},
		{"BEARER  sk-1 ", "sk-1", true},
		{"Basic sk-1", "", false},
		{"Bearer ", "", false},
		{"sk-1", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest("GET", "/v1/models", nil)
		r.Header.Set("Authorization", tc.header)
		if key, ok := bearerKey(r); ok != tc.wantOK || (ok && key != tc.wantKey) {
			t.Errorf("bearerKey(%q) = %q, %v; want %q, %v", tc.header, key, ok, tc.wantKey, tc.wantOK)
		}
	}
}
