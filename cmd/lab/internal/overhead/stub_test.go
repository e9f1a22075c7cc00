package overhead

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// TestStubReportsTheGatewaysLimitsAsOpenAIDoes checks the stub's rate-limit headers: the limits
// the gateway is configured with, so that it learns none lower, remaining counts that never run
// out and change from one answer to the next, as a real provider's do.
func TestStubReportsTheGatewaysLimitsAsOpenAIDoes(t *testing.T) {
	limits := limitsFor(2000)
	cfg := gatewayConfig("http://127.0.0.1:1", 2000, 128)
	if p := cfg.Providers[0]; p.RequestsPerMinute != limits.requests || p.TokensPerMinute != limits.tokens {
		t.Fatalf("the gateway's provider allows %d requests and %d tokens a minute; the stub reports %+v", p.RequestsPerMinute, p.TokensPerMinute, limits)
	}
	remaining := map[string]bool{}
	for n := uint64(1); n <= 2000; n++ {
		h := http.Header{}
		setProviderHeaders(h, limits, n)
		for name, limit := range map[string]int64{"Requests": limits.requests, "Tokens": limits.tokens} {
			if got := h.Get("X-Ratelimit-Limit-" + name); got != strconv.FormatInt(limit, 10) {
				t.Fatalf("answer %d: x-ratelimit-limit-%s = %q; want %d", n, name, got, limit)
			}
			left, err := strconv.ParseInt(h.Get("X-Ratelimit-Remaining-"+name), 10, 64)
			if err != nil || left <= 0 || left >= limit {
				t.Fatalf("answer %d: x-ratelimit-remaining-%s = %q; want a count between 0 and %d", n, name, h.Get("X-Ratelimit-Remaining-"+name), limit)
			}
		}
		remaining[h.Get("X-Ratelimit-Remaining-Requests")] = true
	}
	if len(remaining) < 100 {
		t.Errorf("2000 answers reported %d remaining counts; want them to change as a real provider's do", len(remaining))
	}
}

// TestStubAnswersAShortChatWhateverItsCap answers a chat in 16 tokens at most, whether it names
// no cap (as the bare proxy passes it) or the gateway's default of 256, and a stream as long as
// its cap.
func TestStubAnswersAShortChatWhateverItsCap(t *testing.T) {
	for _, tc := range []struct {
		req        openai.Request
		wantTokens int64
		wantCapped bool
	}{
		{openai.Request{Endpoint: openai.Chat, CompletionTokens: maxTokens}, maxTokens, false},
		{openai.Request{Endpoint: openai.Chat, CompletionTokens: maxTokens, Capped: true}, maxTokens, true},
		{openai.Request{Endpoint: openai.Chat, CompletionTokens: 256, Capped: true}, maxTokens, false},
		{openai.Request{Endpoint: openai.Chat, Stream: true, CompletionTokens: 3200, Capped: true}, 3200, true},
	} {
		got := shortAnswer(tc.req)
		if got.CompletionTokens != tc.wantTokens || got.Capped != tc.wantCapped {
			t.Errorf("shortAnswer(%+v) answers %d tokens, capped %t; want %d, capped %t", tc.req, got.CompletionTokens, got.Capped, tc.wantTokens, tc.wantCapped)
		}
	}
}
