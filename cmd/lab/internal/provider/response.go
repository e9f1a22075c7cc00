package provider

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// response is one response of the Responses API: what was asked, what it
// bills, and how far it has got. The fields above mu are set when it is
// made; those below are safe for concurrent use through its methods.
type response struct {
	req       openai.ResponsesRequest
	id        string
	messageID string
	createdAt int64
	// admission is its admission and its bill if it completes, hidden
	// context included in its input.
	admission admission
	// prompt is the text of its input, its chain's included.
	prompt  prefix
	latency time.Duration
	// run is the context a background response is made in, which Close or
	// cancel ends; cancel ends it, and done is closed once the response
	// has ended. All three are nil for a foreground response.
	run    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	// log is the events of a streamed background response; nil for others.
	log *eventLog
	// events numbers the response's events; only the goroutine that makes
	// the response uses it.
	events openai.ResponseEvents

	mu          sync.Mutex
	status      string
	text        string // the output made so far
	usage       *openai.ResponseUsage
	completedAt int64
	failure     string
}

// object is the response as its object shows it now.
func (r *response) object() openai.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	return openai.Response{
		ID: r.id, CreatedAt: r.createdAt, Status: r.status, Background: r.req.Background, Store: r.req.Store,
		Model: r.req.Model, MessageID: r.messageID, Text: r.text, Usage: r.usage,
		CompletedAt: r.completedAt, Failure: r.failure, ServiceTier: r.admission.tier, Echo: r.req.Echo,
	}
}

func (r *response) setStatus(status string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

func (r *response) addText(piece string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.text += piece
}

// made is the output tokens made so far.
func (r *response) made() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return openai.TokensOf(r.text)
}

// end ends the response with status, billed b, at now (seconds since the
// Unix epoch).
func (r *response) end(status string, b Bill, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.usage = status, &openai.ResponseUsage{
		InputTokens: b.InputTokens, CachedTokens: b.CachedInputTokens, OutputTokens: b.OutputTokens, ReasoningTokens: b.ReasoningTokens,
	}
	if status == openai.StatusCompleted {
		r.completedAt = now
	}
}

// fail ends the response unbilled, failed for the reason msg gives.
func (r *response) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.failure = openai.StatusFailed, msg
}

// chain is the context a response that continues r starts from (r's
// input, its previous responses' included, and the text of its output), in
// tokens and as text, and whether r has ended, so that the chain is known.
func (r *response) chain() (int64, prefix, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ended := r.status != openai.StatusQueued && r.status != openai.StatusInProgress
	text := r.prompt.clone()
	text.write(r.text)
	return r.admission.bill.InputTokens + openai.TokensOf(r.text), text, ended
}
