package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

func TestRefusalError(t *testing.T) {
	tests := []struct {
		name        string
		refusal     admission.Refusal
		wantStatus  int
		wantCode    string
		wantRetry   time.Duration
		wantHeaders map[string]string
	}{{
		name: "a limit refuses: Retry-After rounded up, the exact wait in ms, the caller's limits",
		refusal: admission.Refusal{Reason: admission.Limited, Level: ratelimit.LevelUser, Dimension: ratelimit.Requests,
			Capacity: 50, Remaining: 0, Requested: 1, RetryAfter: 1500 * time.Millisecond,
			Limits: admission.Limits{Requests: admission.Headroom{Capacity: 50, Remaining: 0, Reset: time.Hour}}},
		wantStatus: 429, wantCode: "rate_limit_exceeded", wantRetry: 1500 * time.Millisecond,
		wantHeaders: map[string]string{"Retry-After-Ms": "1500", "X-Ratelimit-Limit-Requests": "50", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1h0m0s"},
	}, {
		name:       "too large: no Retry-After, since waiting will not help",
		refusal:    admission.Refusal{Reason: admission.TooLarge, Level: ratelimit.LevelProvider, Dimension: ratelimit.Tokens, Capacity: 100, Remaining: -1, Requested: 500},
		wantStatus: 429, wantCode: "request_too_large", wantHeaders: map[string]string{},
	}, {
		name:       "the door: the place in the lane and the estimate",
		refusal:    admission.Refusal{Reason: admission.Busy, Position: 7, Estimate: 90 * time.Second, MaxWait: time.Minute, RetryAfter: 30 * time.Second},
		wantStatus: 429, wantCode: "queue_busy", wantRetry: 30 * time.Second,
		wantHeaders: map[string]string{"X-Sluice-Queue-Position": "7", "X-Sluice-Queue-Estimate-Ms": "90000"},
	}, {
		name:       "the store is down and the gateway fails closed",
		refusal:    admission.Refusal{Reason: admission.Unavailable, RetryAfter: time.Second},
		wantStatus: 503, wantCode: "limiter_unavailable", wantRetry: time.Second, wantHeaders: map[string]string{},
	}, {
		name:       "the caller left",
		refusal:    admission.Refusal{Reason: admission.Gone},
		wantStatus: statusClientClosed, wantCode: "client_closed", wantHeaders: map[string]string{},
	}, {
		name:       "no store could decide",
		refusal:    admission.Refusal{Reason: admission.Failed},
		wantStatus: 500, wantCode: "limiter_error", wantHeaders: map[string]string{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			e := refusalError(h, &tc.refusal)
			if e.status != tc.wantStatus || e.Code != tc.wantCode || e.retryAfter != tc.wantRetry || e.Message == "" {
				t.Errorf("refusalError = status %d, code %q, retry after %s, message %q; want %d, %q, %s and a message",
					e.status, e.Code, e.retryAfter, e.Message, tc.wantStatus, tc.wantCode, tc.wantRetry)
			}
			got := map[string]string{}
			for name := range h {
				got[name] = h.Get(name)
			}
			if diff := cmp.Diff(tc.wantHeaders, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryAfterIsWholeSecondsAndAtLeastOne(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second}, {time.Millisecond, time.Second}, {time.Second, time.Second}, {1001 * time.Millisecond, 2 * time.Second}, {-time.Second, time.Second},
	} {
		if got := retryAfter(tc.in); got != tc.want {
			t.Errorf("retryAfter(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
}
