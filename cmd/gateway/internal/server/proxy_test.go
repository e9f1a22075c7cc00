package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

func TestReportedLimitsReadOpenAIsHeaders(t *testing.T) {
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			if got := reportedLimits(h); got != tc.want {
				t.Errorf("reportedLimits = %+v; want %+v", got, tc.want)
			}
		})
	}
}
