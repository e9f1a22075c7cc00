package estimate

import (
	"bytes"
	"cmp"
	"encoding/json"
)

// Usage is the token cost of a call as the provider reported it, or as
// StreamUsage counted it when the provider did not. The zero Usage costs
// nothing.
type Usage struct {
	// PromptTokens is usage.prompt_tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedPromptTokens are those of PromptTokens the provider read from
	// its cache; zero when unknown.
	CachedPromptTokens int64 `json:"-"`
	// CompletionTokens is usage.completion_tokens; 0 for embeddings.
	CompletionTokens int64 `json:"completion_tokens"`
	// TotalTokens is usage.total_tokens, or the sum of the other two when
	// the provider left it out.
	TotalTokens int64 `json:"total_tokens"`
}

// UnmarshalJSON reads a usage in either API's names: prompt_tokens and completion_tokens, or
// the Responses API's input_tokens and output_tokens.
func (u *Usage) UnmarshalJSON(data []byte) error {
	var c counts
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	*u = c.usage()
	return nil
}

// counts are the counts of a usage object, in either API's names.
type counts struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// usage is the Usage that c make.
func (c *counts) usage() Usage {
	return Usage{PromptTokens: cmp.Or(c.PromptTokens, c.InputTokens), CompletionTokens: cmp.Or(c.CompletionTokens, c.OutputTokens),
		TotalTokens: c.TotalTokens}
}

// named returns the count that key names, matched as encoding/json matches keys, without
// regard to case; nil for any other key.
func (c *counts) named(key []byte) *int64 {
	switch {
	case bytes.EqualFold(key, []byte("prompt_tokens")):
		return &c.PromptTokens
	case bytes.EqualFold(key, []byte("completion_tokens")):
		return &c.CompletionTokens
	case bytes.EqualFold(key, []byte("input_tokens")):
		return &c.InputTokens
	case bytes.EqualFold(key, []byte("output_tokens")):
		return &c.OutputTokens
	case bytes.EqualFold(key, []byte("total_tokens")):
		return &c.TotalTokens
	}
	return nil
}

// ParseUsage reads the usage of a response that was not streamed. It reports
// false when the body has no usage, or one that is not three counts of zero
// or more.
func ParseUsage(body []byte) (Usage, bool) {
	if raw := usageValue(body); raw != nil {
		if u, ok := plainUsage(raw); ok {
			return u.checked()
		}
		var u *Usage
		if json.Unmarshal(raw, &u) == nil && u != nil {
			return u.checked()
		}
	}
	return parseUsageWhole(body)
}

// plainUsage reads raw, a usage value, as Usage.UnmarshalJSON does but without encoding/json,
// when it is a JSON object with no escaped key whose counts are each null or an integer of at
// most 18 digits; the values of other keys are passed over. It reports false for any other
// value, for encoding/json to read.
func plainUsage(raw []byte) (Usage, bool) {
	if !json.Valid(raw) || raw[skipSpace(raw, 0)] != '{' {
		return Usage{}, false
	}
	var c counts
	for m := range topMembers(raw) {
		if bytes.IndexByte(m.key, '\\') >= 0 {
			return Usage{}, false
		}
		count, value := c.named(m.key), bytes.TrimSpace(m.value)
		if count == nil || string(value) == "null" { // encoding/json leaves a count that is null as it was
			continue
		}
		n, ok := smallInt(value)
		if !ok {
			return Usage{}, false
		}
		*count = n
	}
	return c.usage(), true
}

// smallInt returns the valid JSON number b when it is an integer of at most 18 digits, which no
// int64 overflows.
func smallInt(b []byte) (int64, bool) {
	digits := bytes.TrimPrefix(b, []byte("-"))
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	if len(digits) < len(b) {
		n = -n
	}
	return n, true
}

// parseUsageWhole is ParseUsage by decoding the whole body: the way that says what any body
// holds, such as a key spelled "Usage", which encoding/json matches too.
func parseUsageWhole(body []byte) (Usage, bool) {
	var resp struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Usage == nil {
		return Usage{}, false
	}
	return resp.Usage.checked()
}

// usageValue returns the value of the last "usage" key of a JSON object, or nil when it finds
// none, or finds the body cut off or a key escaped: encoding/json then says what the body holds.
// It scans the body without decoding it (see topMembers); ParseUsage decodes only the value.
func usageValue(body []byte) []byte {
	var found []byte
	for m := range topMembers(body) {
		switch {
		case m.value == nil || bytes.IndexByte(m.key, '\\') >= 0:
			return nil
		case bytes.EqualFold(m.key, []byte("usage")): // as encoding/json matches keys
			found = m.value
		}
	}
	return found
}

// Tokens returns the prompt and completion tokens together, stopping at math.MaxInt64.
func (u Usage) Tokens() int64 { return addSat(u.PromptTokens, u.CompletionTokens) }

// Within returns u bounded by what a call of estimate e could have used (its MaxPromptTokens and
// CompletionTokens), each count at least zero and its total their sum. It reports whether u was
// within those bounds already.
func (u Usage) Within(e Estimate) (Usage, bool) {
	b := Usage{PromptTokens: min(max(u.PromptTokens, 0), e.MaxPromptTokens), CompletionTokens: min(max(u.CompletionTokens, 0), e.CompletionTokens)}
	b.TotalTokens = b.Tokens()
	return b, b.PromptTokens == u.PromptTokens && b.CompletionTokens == u.CompletionTokens
}

// checked fills in the total and reports whether u is plausible.
func (u Usage) checked() (Usage, bool) {
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 {
		return Usage{}, false
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = addSat(u.PromptTokens, u.CompletionTokens)
	}
	return u, true
}

// StreamUsage follows a streamed response to settle it. It remembers the last
// usage the provider sends (the final chunk, when the request asked for it
// with stream_options.include_usage) and counts the completion text of every
// chunk, so the call can be settled by counting when no usage arrives.
//
// Feed it with Observe. A StreamUsage follows one stream and is not safe for
// concurrent use. The zero StreamUsage counts with the proxy and assumes no
// prompt tokens.
type StreamUsage struct {
	counter    *Counter
	encoding   string
	prompt     int64
	completion int64
	reported   Usage
	isReported bool
	done       bool
	response   string   // a Responses stream's response id
	items      []string // and its output items' ids
}

// NewStreamUsage returns a StreamUsage that counts completion text with c
// under encoding, and reports promptTokens (the estimate's) as the prompt
// when the provider reports no usage.
func NewStreamUsage(c *Counter, encoding string, promptTokens int64) *StreamUsage {
	return &StreamUsage{counter: c, encoding: encoding, prompt: max(promptTokens, 0)}
}

// streamChunk is what a chunk of a streamed chat or completions response, or
// an event of a streamed Responses API response, carries that counts.
type streamChunk struct {
	// Type, Delta and Response are a Responses event's: its type, the text a
	// delta event adds, and the response a final event carries with its usage.
	Type     string          `json:"type"`
	Delta    json.RawMessage `json:"delta"`
	Response *struct {
		ID    string `json:"id"`
		Usage *Usage `json:"usage"`
	} `json:"response"`
	// Item is the output item an event adds, whose id the provider keeps with the response.
	Item *struct {
		ID string `json:"id"`
	} `json:"item"`

	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

// doneEvent is the payload that ends an OpenAI stream.
var doneEvent = []byte("[DONE]")

// Observe takes the payload of one server-sent event, the text after
// "data:". It ignores the closing [DONE] and payloads it cannot read.
func (s *StreamUsage) Observe(data []byte) {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneEvent) {
		s.done = true
		return
	}
	if len(data) == 0 {
		return
	}
	var chunk streamChunk
	if json.Unmarshal(data, &chunk) != nil {
		return
	}
	s.done = s.done || finalEvents[chunk.Type]
	s.keep(&chunk)
	if chunk.Response != nil && chunk.Usage == nil {
		chunk.Usage = chunk.Response.Usage
	}
	if chunk.Usage != nil {
		if u, ok := chunk.Usage.checked(); ok {
			s.reported, s.isReported = u, true
		}
	}
	s.countChoices(&chunk)
	if countedDeltas[chunk.Type] && firstByte(chunk.Delta) == '"' {
		var text string
		if json.Unmarshal(chunk.Delta, &text) == nil {
			s.count(text)
		}
	}
}

// keep notes the ids a Responses event names: its response's, and an output item it adds.
func (s *StreamUsage) keep(chunk *streamChunk) {
	if chunk.Response != nil && chunk.Response.ID != "" {
		s.response = chunk.Response.ID
	}
	if chunk.Type == "response.output_item.added" && chunk.Item != nil && chunk.Item.ID != "" {
		s.items = append(s.items, chunk.Item.ID)
	}
}

// Response returns the id of a Responses stream's response and of its output items, as its
// events named them; an empty id before they did.
func (s *StreamUsage) Response() (id string, items []string) { return s.response, s.items }

// countedDeltas are the Responses events whose delta is completion text the provider bills.
var countedDeltas = map[string]bool{
	"response.output_text.delta":             true,
	"response.refusal.delta":                 true,
	"response.function_call_arguments.delta": true,
	"response.reasoning_text.delta":          true,
	"response.reasoning_summary_text.delta":  true,
}

// finalEvents are the Responses events that end a stream: nothing billed follows them.
var finalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}

// Done reports whether the stream has said it is complete: a chat or completions stream's
// [DONE], or a Responses stream's final event. What the provider sends after it bills nothing.
func (s *StreamUsage) Done() bool { return s.done }

// countChoices counts the completion text of a chunk, each delta on its own.
func (s *StreamUsage) countChoices(chunk *streamChunk) {
	for _, c := range chunk.Choices {
		s.count(c.Text)
		s.count(c.Delta.Content)
		s.count(c.Delta.Refusal)
		for _, call := range c.Delta.ToolCalls {
			s.count(call.Function.Name)
			s.count(call.Function.Arguments)
		}
	}
}

// count adds the tokens of one piece of completion text.
func (s *StreamUsage) count(text string) {
	if text != "" {
		s.completion = addSat(s.completion, s.counter.Count(s.encoding, text))
	}
}

// Usage returns the usage to settle with, and true when the provider reported
// it. Otherwise it is the prompt tokens given to NewStreamUsage and the
// completion tokens counted so far.
func (s *StreamUsage) Usage() (Usage, bool) {
	if s.isReported {
		return s.reported, true
	}
	u := Usage{PromptTokens: s.prompt, CompletionTokens: s.completion}
	u.TotalTokens = addSat(u.PromptTokens, u.CompletionTokens)
	return u, false
}
