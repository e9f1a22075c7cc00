package server

import (
	"net/http"
	"strconv"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/upstream"
)

// answerHeaders are the headers of a provider's answer that reach its client: what the body is
// (its type, length and encoding), whether it may be cached, and the provider's id for the call
// (OpenAI's x-request-id, Anthropic's request-id) and its time on it. Every other header stays at the gateway: the provider's cookies, its
// Retry-After (the client gets the gateway's own, see ownRetryAfter), its rate limits and account
// (the client sees its own limits, set before the call), those of one connection, and whatever
// else a provider sends.
var answerHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Cache-Control": true,
	headerRequestID: true, headerAnthropicRequestID: true, "Openai-Processing-Ms": true,
}

// ownRetryAfter tells the client of a provider's 429 or 503, answer being its header (nil for a
// job's call, which has no client), when to come back: what the provider asked, held between a
// second and the provider's retry maxDelay (as long as the gateway pauses the provider's queue
// for it), in whole seconds; a second when it asked nothing the gateway could read.
func ownRetryAfter(answer http.Header, resp *http.Response, p *gatewayv1.Provider) {
	if answer == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return
	}
	wait := min(max(upstream.RetryAfter(resp.Header), time.Second), max(p.Retry.MaxDelay.Duration, time.Second))
	answer["Retry-After"] = []string{strconv.FormatInt(int64(admission.RetryAfter(wait)/time.Second), 10)}
}
