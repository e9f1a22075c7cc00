package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
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
			got, err := readAtMost(resp, 16)
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
