package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// TestOwnRetryAfterBoundsWhatTheProviderAsked checks the Retry-After a client of a provider's 429
// or 503 gets: what the provider asked, in whole seconds from 1 to the provider's retry maxDelay
// (30 s here), whatever it sent.
func TestOwnRetryAfterBoundsWhatTheProviderAsked(t *testing.T) {
	provider := &gatewayv1.Provider{Retry: gatewayv1.Retry{MaxDelay: metav1.Duration{Duration: 30 * time.Second}}}
	tests := []struct {
		name    string
		status  int
		headers map[string]string
		want    []string
	}{
		{"seconds", http.StatusTooManyRequests, map[string]string{"Retry-After": "3"}, []string{"3"}},
		{"a fraction, rounded up", http.StatusTooManyRequests, map[string]string{"Retry-After": "2.5"}, []string{"3"}},
		{"milliseconds", http.StatusTooManyRequests, map[string]string{"Retry-After-Ms": "1200"}, []string{"2"}},
		{"negative", http.StatusTooManyRequests, map[string]string{"Retry-After": "-5"}, []string{"1"}},
		{"a day", http.StatusServiceUnavailable, map[string]string{"Retry-After": "86400"}, []string{"30"}},
		{"a date in 2099", http.StatusTooManyRequests, map[string]string{"Retry-After": "Thu, 01 Jan 2099 00:00:00 GMT"}, []string{"30"}},
		{"not a time", http.StatusTooManyRequests, map[string]string{"Retry-After": "soon"}, []string{"1"}},
		{"none", http.StatusServiceUnavailable, nil, []string{"1"}},
		{"not a throttle", http.StatusInternalServerError, map[string]string{"Retry-After": "10"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
			for k, v := range tc.headers {
				resp.Header.Set(k, v)
			}
			answer := http.Header{}
			ownRetryAfter(answer, resp, provider)
			if diff := cmp.Diff(tc.want, answer["Retry-After"]); diff != "" {
				t.Errorf("Retry-After (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPassHeadersPassesOnlyTheAllowlist(t *testing.T) {
	client := http.Header{"X-Request-Id": {"req_1"}}
	answer := http.Header{
		"Content-Type":               {"application/json"},
		"Content-Length":             {"42"},
		"Cache-Control":              {"no-cache, must-revalidate"},
		"Openai-Processing-Ms":       {"120"},
		"Connection":                 {"keep-alive, X-Hop, Cache-Control"},
		"Keep-Alive":                 {"timeout=5"},
		"X-Hop":                      {"for this connection"},
		"Transfer-Encoding":          {"chunked"},
		"Upgrade":                    {"h2c"},
		"X-Request-Id":               {"req_provider"},
		"X-Ratelimit-Limit-Requests": {"10000"},
		"Openai-Organization":        {"the gateway's"},
		"Set-Cookie":                 {"__cf_bm=the-gateways; HttpOnly"},
		"Retry-After":                {"-5"},
		"Retry-After-Ms":             {"-5000"},
		"X-Anything":                 {"else"},
	}
	passHeaders(client, answer)
	want := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"42"}, "Openai-Processing-Ms": {"120"},
		"X-Request-Id": {"req_1", "req_provider"}}
	if diff := cmp.Diff(want, client); diff != "" {
		t.Errorf("the client's headers (-want +got):\n%s", diff)
	}
}

// TestAProvidersThrottleReachesTheClientWithTheGatewaysHeaders has the provider answer 429 with
// a Retry-After of a day and a cookie: the client gets the gateway's Retry-After, held to the
// provider's retry maxDelay, and no cookie.
func TestAProvidersThrottleReachesTheClientWithTheGatewaysHeaders(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Retry-After", "86400")
		w.Header().Set("Set-Cookie", "__cf_bm=the-gateways; HttpOnly")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Slow down.","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Providers[0].Retry.MaxDelay.Duration = 20 * time.Second
	g := newSettleGatewayFrom(t, cfg)
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s; want the provider's 429", w.Code, w.Body)
	}
	if got := w.Header().Values("Retry-After"); !cmp.Equal(got, []string{"20"}) {
		t.Errorf("Retry-After %q; want [20], the provider's retry maxDelay", got)
	}
	if got := w.Header().Values("Set-Cookie"); got != nil {
		t.Errorf("Set-Cookie %q reached the client", got)
	}
}
