package ramp

import (
	"net/http"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Cause
	}{
		{name: "served", status: 200, body: `{"usage":{}}`, want: Served},
		{name: "the provider's 429 on tokens", status: 429,
			body: `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-lab on tokens per min (TPM): Limit 300000","type":"tokens","code":"rate_limit_exceeded"}}`,
			want: ProviderTokens},
		{name: "the provider's 429 on requests", status: 429,
			body: `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-lab on requests per min (RPM): Limit 1500","type":"requests","code":"rate_limit_exceeded"}}`,
			want: ProviderRequests},
		{name: "a provider 429 told by its message alone", status: 429,
			body: `{"error":{"message":"Rate limit reached on tokens per min (TPM)","type":"rate_limit_error","code":"rate_limit_exceeded"}}`,
			want: ProviderTokens},
		{name: "the provider's 503", status: 503,
			body: `{"error":{"message":"The server is overloaded","type":"overloaded_error","code":"overloaded"}}`,
			want: ProviderOverloaded},
		{name: "the gateway's own 429", status: 429,
			body: `{"error":{"message":"Rate limit reached: the user limit on requests: limit 5, remaining 0, requested 1.","type":"rate_limit_error","code":"rate_limit_exceeded"}}`,
			want: Refused},
		{name: "the gateway's queue, busy at the door", status: 429, header: http.Header{"X-Sluice-Queue-Position": {"42"}},
			body: `{"error":{"message":"The queue is busy: your request would wait about 1m30s, more than your plan's 1m0s.","type":"rate_limit_error","code":"queue_busy"}}`,
			want: Busy},
		{name: "busy told by the code alone", status: 429,
			body: `{"error":{"message":"The queue is busy.","type":"rate_limit_error","code":"queue_busy"}}`,
			want: Busy},
		{name: "busy told by the design's header alone", status: 429, header: http.Header{"X-Queue-Position": {"42"}},
			body: `{"error":{"message":"Try later.","type":"rate_limit_error","code":"rate_limit_exceeded"}}`,
			want: Busy},
		{name: "a 429 without an error body", status: 429, body: `slow down`, want: Refused},
		{name: "the gateway's store is down", status: 503,
			body: `{"error":{"message":"The gateway cannot check your limits right now.","type":"api_error","code":"limiter_unavailable"}}`,
			want: OtherError},
		{name: "the provider unreachable", status: 502,
			body: `{"error":{"message":"The provider of this model could not be reached.","type":"api_error","code":"provider_unreachable"}}`,
			want: OtherError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.status, tc.header, []byte(tc.body)); got != tc.want {
				t.Errorf("classify(%d, %v, %s) = %s; want %s", tc.status, tc.header, tc.body, got, tc.want)
			}
		})
	}
}
