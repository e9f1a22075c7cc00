package openai

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// The statuses of a response.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusCancelled  = "cancelled"
	StatusFailed     = "failed"
)

// Response is one response of the Responses API as its object shows it at
// one moment.
type Response struct {
	// ID is the response's id: "resp_" and hex.
	ID string
	// CreatedAt is when it was made, in seconds since the Unix epoch.
	CreatedAt int64
	// Status is one of the Status constants.
	Status string
	// Background and Store are as the request set them.
	Background, Store bool
	// Model is the model that answers.
	Model string
	// MessageID is the id of its output message: "msg_" and hex.
	MessageID string
	// Text is the output generated so far.
	Text string
	// Usage is what it was billed; nil until it ends billed.
	Usage *ResponseUsage
	// CompletedAt is when it completed, in seconds since the Unix epoch;
	// zero unless it did.
	CompletedAt int64
	// Failure says why it failed; empty unless it did.
	Failure string
	// ServiceTier is the tier that serves it; empty writes TierDefault.
	ServiceTier string
	// Echo is what the object repeats of the request.
	Echo Echo
}

// ResponseUsage is what a response was billed, written as OpenAI's usage
// block.
type ResponseUsage struct {
	// InputTokens is usage.input_tokens, hidden context included.
	InputTokens int64
	// CachedTokens is usage.input_tokens_details.cached_tokens: the
	// input's leading tokens read from the cache.
	CachedTokens int64
	// OutputTokens is usage.output_tokens.
	OutputTokens int64
	// ReasoningTokens is usage.output_tokens_details.reasoning_tokens: the
	// output the model reasoned, which the response does not show.
	ReasoningTokens int64
}

// MarshalJSON writes u with its details and total.
func (u ResponseUsage) MarshalJSON() ([]byte, error) {
	type inputDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	}
	type outputDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}
	return json.Marshal(struct {
		InputTokens         int64         `json:"input_tokens"`
		InputTokensDetails  inputDetails  `json:"input_tokens_details"`
		OutputTokens        int64         `json:"output_tokens"`
		OutputTokensDetails outputDetails `json:"output_tokens_details"`
		TotalTokens         int64         `json:"total_tokens"`
	}{
		InputTokens: u.InputTokens, InputTokensDetails: inputDetails{CachedTokens: u.CachedTokens},
		OutputTokens: u.OutputTokens, OutputTokensDetails: outputDetails{ReasoningTokens: u.ReasoningTokens},
		TotalTokens: u.InputTokens + u.OutputTokens,
	})
}

// responseObject is the JSON of a Response.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Background        bool            `json:"background"`
	CompletedAt       *int64          `json:"completed_at"`
	Error             *responseError  `json:"error"`
	IncompleteDetails *struct{}       `json:"incomplete_details"`
	Model             string          `json:"model"`
	Output            []outputMessage `json:"output"`
	ServiceTier       string          `json:"service_tier"`
	Store             bool            `json:"store"`
	Usage             *ResponseUsage  `json:"usage"`
	Conversation      *struct{}       `json:"conversation"`
	Prompt            *struct{}       `json:"prompt"`
	AccessPrograms    accessPrograms  `json:"access_programs"`
	Echo
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type accessPrograms struct {
	Cyber string `json:"cyber"`
}

// outputMessage is the assistant's message, the one item of a response's
// output.
type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is the message's one content part.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// MarshalJSON writes r as OpenAI's Response object.
func (r Response) MarshalJSON() ([]byte, error) {
	o := responseObject{
		ID: r.ID, Object: "response", CreatedAt: r.CreatedAt, Status: r.Status, Background: r.Background,
		Model: r.Model, Output: r.output(), ServiceTier: cmp.Or(r.ServiceTier, TierDefault), Store: r.Store, Usage: r.Usage,
		AccessPrograms: accessPrograms{Cyber: "standard"}, Echo: r.Echo,
	}
	if r.CompletedAt != 0 {
		o.CompletedAt = &r.CompletedAt
	}
	if r.Failure != "" {
		o.Error = &responseError{Code: "server_error", Message: r.Failure}
	}
	return json.Marshal(o)
}

// output is the response's output: nothing while it runs or if it made no
// text, else its message, incomplete unless the response completed.
func (r Response) output() []outputMessage {
	switch {
	case r.Status == StatusCompleted:
		return []outputMessage{r.message(StatusCompleted, r.Text)}
	case r.Status == StatusQueued, r.Status == StatusInProgress, r.Text == "":
		return []outputMessage{}
	}
	return []outputMessage{r.message("incomplete", r.Text)}
}

func (r Response) message(status, text string) outputMessage {
	m := outputMessage{ID: r.MessageID, Type: "message", Status: status, Role: "assistant", Content: []outputText{}}
	if status != StatusInProgress {
		m.Content = []outputText{textPart(text)}
	}
	return m
}

func textPart(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// NewID is prefix and 48 random hex digits, as OpenAI's ids of responses
// and items are.
func NewID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// Event is one server-sent event of a Responses stream.
type Event struct {
	// Type is the event's type, such as "response.created".
	Type string
	// Sequence is its sequence_number: its place in the stream, from 0.
	Sequence int64
	// Data is its JSON, which carries the type and the sequence number.
	Data []byte
}

// ResponseEvents makes the events of one streamed response, numbered in
// turn from 0. The zero value is ready to use. It is not safe for
// concurrent use.
type ResponseEvents struct{ next int64 }

// Start is the events before the text: response.created with r,
// response.in_progress with r in progress, and the output message and its
// text part added, empty.
func (e *ResponseEvents) Start(r Response) []Event {
	created := e.make("response.created", map[string]any{"response": r})
	r.Status = StatusInProgress
	return []Event{
		created,
		e.make("response.in_progress", map[string]any{"response": r}),
		e.make("response.output_item.added", map[string]any{"output_index": 0, "item": r.message(StatusInProgress, "")}),
		e.make("response.content_part.added", e.partFields(r, map[string]any{"part": textPart("")})),
	}
}

// Delta is the event that adds delta to r's text.
func (e *ResponseEvents) Delta(r Response, delta string) Event {
	return e.make("response.output_text.delta", e.partFields(r, map[string]any{"delta": delta, "logprobs": []any{}}))
}

// Finish is the events after the text of r, which has completed: the text,
// its part and the message done, and response.completed with r.
func (e *ResponseEvents) Finish(r Response) []Event {
	return []Event{
		e.make("response.output_text.done", e.partFields(r, map[string]any{"text": r.Text, "logprobs": []any{}})),
		e.make("response.content_part.done", e.partFields(r, map[string]any{"part": textPart(r.Text)})),
		e.make("response.output_item.done", map[string]any{"output_index": 0, "item": r.message(StatusCompleted, r.Text)}),
		e.make("response.completed", map[string]any{"response": r}),
	}
}

// Failed is response.failed with r, which has failed.
func (e *ResponseEvents) Failed(r Response) Event {
	return e.make("response.failed", map[string]any{"response": r})
}

// partFields are fields with those that place an event in r's text part.
func (e *ResponseEvents) partFields(r Response, fields map[string]any) map[string]any {
	fields["item_id"], fields["output_index"], fields["content_index"] = r.MessageID, 0, 0
	return fields
}

func (e *ResponseEvents) make(typ string, fields map[string]any) Event {
	fields["type"], fields["sequence_number"] = typ, e.next
	data, _ := json.Marshal(fields) // strings, numbers and a Response: it cannot fail
	ev := Event{Type: typ, Sequence: e.next, Data: data}
	e.next++
	return ev
}

// WriteItems answers GET /v1/responses/{id}/input_items with one page of
// items, and whether more follow it.
func WriteItems(w http.ResponseWriter, items []InputItem, hasMore bool) {
	list := struct {
		Object  string      `json:"object"`
		Data    []InputItem `json:"data"`
		FirstID *string     `json:"first_id"`
		LastID  *string     `json:"last_id"`
		HasMore bool        `json:"has_more"`
	}{Object: "list", Data: items, HasMore: hasMore}
	if len(items) > 0 {
		list.FirstID, list.LastID = &items[0].ID, &items[len(items)-1].ID
	} else {
		list.Data = []InputItem{}
	}
	WriteJSON(w, http.StatusOK, list)
}

// WriteDeleted answers the deletion of the response id.
func WriteDeleted(w http.ResponseWriter, id string) {
	WriteJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response.deleted", true})
}
