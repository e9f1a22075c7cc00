package estimate

import (
	"bytes"
	"cmp"
	"encoding/json"
)

// Usage is the token cost of a call as the provider reported it, or as
// StreamUsage counted it when the provider did not: its prompt and completion
// tokens, and of them those of each class a provider bills at its own price.
// The classes of the prompt are parts of PromptTokens, those of the
// completion parts of CompletionTokens. The zero Usage costs nothing.
type Usage struct {
	// PromptTokens is usage.prompt_tokens (the Responses API's
	// input_tokens): every prompt token, of every class.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedPromptTokens are the prompt tokens read from the provider's cache:
	// usage.prompt_tokens_details.cached_tokens (input_tokens_details).
	CachedPromptTokens int64 `json:"-"`
	// AudioPromptTokens are the prompt tokens of audio:
	// usage.prompt_tokens_details.audio_tokens.
	AudioPromptTokens int64 `json:"-"`
	// CacheWriteTokens are the prompt tokens written to the provider's cache,
	// which a provider such as Anthropic bills apart; OpenAI reports none.
	CacheWriteTokens int64 `json:"-"`
	// CompletionTokens is usage.completion_tokens (output_tokens): every
	// completion token, reasoning and audio included; 0 for embeddings.
	CompletionTokens int64 `json:"completion_tokens"`
	// ReasoningTokens are the completion tokens the model reasoned with,
	// billed as output: usage.completion_tokens_details.reasoning_tokens
	// (output_tokens_details).
	ReasoningTokens int64 `json:"-"`
	// AudioCompletionTokens are the completion tokens of audio:
	// usage.completion_tokens_details.audio_tokens.
	AudioCompletionTokens int64 `json:"-"`
	// TotalTokens is usage.total_tokens, or the sum of prompt and completion
	// tokens when the provider left it out.
	TotalTokens int64 `json:"total_tokens"`
	// ServiceTier is the service tier the answer says served the call: its
	// service_tier (a Responses stream's, its response's); empty when it
	// says none.
	ServiceTier string `json:"-"`
}

// UnmarshalJSON reads a usage object in any API's names: prompt_tokens and completion_tokens
// with their details, the Responses API's input_tokens and output_tokens with theirs, or
// Anthropic's, whose input_tokens leave out what the call read from the cache
// (cache_read_input_tokens) and wrote to it (cache_creation_input_tokens): its prompt is the
// three together. The service tier is not in the usage object: ParseUsage reads it beside.
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
	PromptTokens      int64   `json:"prompt_tokens"`
	CompletionTokens  int64   `json:"completion_tokens"`
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	TotalTokens       int64   `json:"total_tokens"`
	PromptDetails     details `json:"prompt_tokens_details"`
	CompletionDetails details `json:"completion_tokens_details"`
	InputDetails      details `json:"input_tokens_details"`
	OutputDetails     details `json:"output_tokens_details"`
	// CacheRead and CacheCreation are Anthropic's, apart from its input_tokens.
	CacheRead     int64 `json:"cache_read_input_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
}

// details are the counts of one of a usage's details objects: the tokens of each class among its
// prompt or its completion tokens.
type details struct {
	CachedTokens    int64 `json:"cached_tokens"`
	AudioTokens     int64 `json:"audio_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// usage is the Usage that c make.
func (c *counts) usage() Usage {
	return Usage{
		PromptTokens:          cmp.Or(c.PromptTokens, addSat(addSat(c.InputTokens, max(c.CacheRead, 0)), max(c.CacheCreation, 0))),
		CachedPromptTokens:    cmp.Or(c.PromptDetails.CachedTokens, c.InputDetails.CachedTokens, c.CacheRead),
		CacheWriteTokens:      c.CacheCreation,
		AudioPromptTokens:     cmp.Or(c.PromptDetails.AudioTokens, c.InputDetails.AudioTokens),
		CompletionTokens:      cmp.Or(c.CompletionTokens, c.OutputTokens),
		ReasoningTokens:       cmp.Or(c.CompletionDetails.ReasoningTokens, c.OutputDetails.ReasoningTokens),
		AudioCompletionTokens: cmp.Or(c.CompletionDetails.AudioTokens, c.OutputDetails.AudioTokens),
		TotalTokens:           c.TotalTokens,
	}
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
	case bytes.EqualFold(key, []byte("cache_read_input_tokens")):
		return &c.CacheRead
	case bytes.EqualFold(key, []byte("cache_creation_input_tokens")):
		return &c.CacheCreation
	}
	return nil
}

// detailsNamed returns the details object that key names, matched as named matches keys; nil
// for any other key.
func (c *counts) detailsNamed(key []byte) *details {
	switch {
	case bytes.EqualFold(key, []byte("prompt_tokens_details")):
		return &c.PromptDetails
	case bytes.EqualFold(key, []byte("completion_tokens_details")):
		return &c.CompletionDetails
	case bytes.EqualFold(key, []byte("input_tokens_details")):
		return &c.InputDetails
	case bytes.EqualFold(key, []byte("output_tokens_details")):
		return &c.OutputDetails
	}
	return nil
}

// named returns the count of d that key names, matched as counts.named matches keys; nil for
// any other key.
func (d *details) named(key []byte) *int64 {
	switch {
	case bytes.EqualFold(key, []byte("cached_tokens")):
		return &d.CachedTokens
	case bytes.EqualFold(key, []byte("audio_tokens")):
		return &d.AudioTokens
	case bytes.EqualFold(key, []byte("reasoning_tokens")):
		return &d.ReasoningTokens
	}
	return nil
}

// ParseUsage reads the usage of a response that was not streamed, and the service tier the
// response names. It reports false when the body has no usage, or one whose counts are not each
// zero or more.
func ParseUsage(body []byte) (Usage, bool) {
	if raw, tier := answerValues(body); raw != nil {
		u, ok := plainUsage(raw)
		if !ok {
			var decoded *Usage
			if json.Unmarshal(raw, &decoded) != nil || decoded == nil {
				return parseUsageWhole(body)
			}
			u = *decoded
		}
		u.ServiceTier = tierOf(tier)
		return u.checked()
	}
	return parseUsageWhole(body)
}

// plainUsage reads raw, a usage value, as Usage.UnmarshalJSON does but without encoding/json,
// when it is plain: a JSON object with no escaped key whose counts are each null or an integer of
// at most 18 digits, whose details objects are each null or an object of such counts, and whose
// other values are each null, such an integer, a string without escapes, or an object of them. It
// checks the syntax as it reads, in one pass. It reports false for any other value, for
// encoding/json to read and to say what it holds.
func plainUsage(raw []byte) (Usage, bool) {
	var c counts
	r := usageReader{b: raw}
	if !r.object(func(key []byte) bool { return r.usageMember(&c, key) }) || r.skipSpace() < len(raw) {
		return Usage{}, false
	}
	return c.usage(), true
}

// usageReader reads a plain usage object (see plainUsage) from b[i:].
type usageReader struct {
	b []byte
	i int
}

// usageMember reads the value of a usage object's key into c.
func (r *usageReader) usageMember(c *counts, key []byte) bool {
	d := c.detailsNamed(key)
	switch {
	case d == nil:
		return r.value(c.named(key), true)
	case r.is('{'):
		return r.object(func(key []byte) bool { return r.value(d.named(key), false) })
	}
	return r.null()
}

// value reads a value into count, as encoding/json decodes an int64: an integer, or null, which
// leaves count as it was. A nil count, a key nothing reads, passes over a string too, and an
// object of such values when nested is true.
func (r *usageReader) value(count *int64, nested bool) bool {
	switch {
	case r.is('n'):
		return r.null()
	case r.is('-') || r.digit():
		return r.integer(count)
	case count != nil:
		return false
	case r.is('"'):
		_, ok := r.text()
		return ok
	case nested && r.is('{'):
		return r.object(func([]byte) bool { return r.value(nil, false) })
	}
	return false
}

// object reads the object at r.i, and the spaces after it: member reads the value of each key.
func (r *usageReader) object(member func(key []byte) bool) bool {
	if r.skipSpace(); !r.is('{') {
		return false
	}
	r.i++
	if r.skipSpace(); r.is('}') {
		r.i++
		return true
	}
	for {
		key, ok := r.text()
		if r.skipSpace(); !ok || !r.is(':') {
			return false
		}
		r.i++
		if r.skipSpace(); r.i == len(r.b) || !member(key) {
			return false
		}
		switch r.skipSpace(); {
		case r.is('}'):
			r.i++
			return true
		case !r.is(','):
			return false
		}
		r.i++
		r.skipSpace()
	}
}

// text returns the text of the string at r.i when it has no escape and no control character.
func (r *usageReader) text() ([]byte, bool) {
	if !r.is('"') {
		return nil, false
	}
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			text := r.b[r.i+1 : j]
			r.i = j + 1
			return text, true
		case c == '\\' || c < ' ':
			return nil, false
		}
	}
	return nil, false
}

// integer reads the integer at r.i into count, unless count is nil, when it is a JSON integer of
// at most 18 digits, which no int64 overflows; not a fraction or an exponent.
func (r *usageReader) integer(count *int64) bool {
	start := r.i
	if r.is('-') {
		r.i++
	}
	digits := r.i
	for r.digit() {
		r.i++
	}
	switch n := r.i - digits; {
	case n == 0 || n > 18 || n > 1 && r.b[digits] == '0':
		return false
	case r.is('.') || r.is('e') || r.is('E'):
		return false
	}
	if count != nil {
		*count, _ = smallInt(r.b[start:r.i])
	}
	return true
}

// null reads the null at r.i.
func (r *usageReader) null() bool {
	if !bytes.HasPrefix(r.b[r.i:], []byte("null")) {
		return false
	}
	r.i += len("null")
	return true
}

// is reports whether the byte at r.i is c.
func (r *usageReader) is(c byte) bool { return r.i < len(r.b) && r.b[r.i] == c }

// digit reports whether the byte at r.i is a decimal digit.
func (r *usageReader) digit() bool { return r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' }

// skipSpace moves r.i past spaces, and returns it.
func (r *usageReader) skipSpace() int {
	r.i = skipSpace(r.b, r.i)
	return r.i
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

// answer is what ParseUsage reads of an answer, decoded whole.
type answer struct {
	Usage       *Usage          `json:"usage"`
	ServiceTier json.RawMessage `json:"service_tier"`
}

// parseUsageWhole is ParseUsage by decoding the whole body: the way that says what any body
// holds, such as a key spelled "Usage", which encoding/json matches too.
func parseUsageWhole(body []byte) (Usage, bool) {
	var a answer
	if json.Unmarshal(body, &a) != nil || a.Usage == nil {
		return Usage{}, false
	}
	a.Usage.ServiceTier = tierOf(a.ServiceTier)
	return a.Usage.checked()
}

// answerValues returns the values of the last "usage" key and the last "service_tier" key of a
// JSON object, each nil when it finds none; a nil usage too when it finds the body cut off or a
// key escaped: encoding/json then says what the body holds. It scans the body without decoding it
// (see topMembers); ParseUsage decodes only the values.
func answerValues(body []byte) (usage, tier []byte) {
	for m := range topMembers(body) {
		switch {
		case m.value == nil || bytes.IndexByte(m.key, '\\') >= 0:
			return nil, nil
		case bytes.EqualFold(m.key, []byte("usage")): // as encoding/json matches keys
			usage = m.value
		case bytes.EqualFold(m.key, []byte("service_tier")):
			tier = m.value
		}
	}
	return usage, tier
}

// knownTiers are the service tiers OpenAI's answers name, so that reading one makes no string.
var knownTiers = []string{"default", "auto", "flex", "priority", "scale"}

// tierOf returns the service tier that raw, a JSON value, names: a string's text, and "" for
// any other value or none. A string of printable ASCII without escapes is its bytes; any other
// is decoded.
func tierOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if text := raw[1 : len(raw)-1]; plainKey(text) && bytes.IndexByte(text, '"') < 0 {
		for _, t := range knownTiers {
			if string(text) == t {
				return t
			}
		}
		return string(text)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Tokens returns the prompt and completion tokens together, stopping at math.MaxInt64.
func (u Usage) Tokens() int64 { return addSat(u.PromptTokens, u.CompletionTokens) }

// Within returns u bounded by what a call of estimate e could have used: its prompt tokens at
// most e.MaxPromptTokens and its completion tokens at most e.CompletionTokens; the classes of
// each, together, at most it (audio, then cache writes, then cached tokens take what is left of
// the prompt, so that a report past its bounds is read at the classes usually priced higher);
// each count at least zero, and its total their sum. It reports whether u was within those
// bounds already.
func (u Usage) Within(e Estimate) (Usage, bool) {
	b := Usage{PromptTokens: atMost(u.PromptTokens, e.MaxPromptTokens), CompletionTokens: atMost(u.CompletionTokens, e.CompletionTokens),
		ServiceTier: u.ServiceTier}
	b.AudioPromptTokens = atMost(u.AudioPromptTokens, b.PromptTokens)
	b.CacheWriteTokens = atMost(u.CacheWriteTokens, b.PromptTokens-b.AudioPromptTokens)
	b.CachedPromptTokens = atMost(u.CachedPromptTokens, b.PromptTokens-b.AudioPromptTokens-b.CacheWriteTokens)
	b.ReasoningTokens = atMost(u.ReasoningTokens, b.CompletionTokens)
	b.AudioCompletionTokens = atMost(u.AudioCompletionTokens, b.CompletionTokens)
	b.TotalTokens = u.TotalTokens // the one count not bounded: set below
	within := b == u
	b.TotalTokens = b.Tokens()
	return b, within
}

// atMost returns n held between zero and bound.
func atMost(n, bound int64) int64 { return min(max(n, 0), bound) }

// checked fills in the total and reports whether u is plausible: every count zero or more.
func (u Usage) checked() (Usage, bool) {
	for _, n := range [...]int64{u.PromptTokens, u.CachedPromptTokens, u.AudioPromptTokens, u.CacheWriteTokens,
		u.CompletionTokens, u.ReasoningTokens, u.AudioCompletionTokens, u.TotalTokens} {
		if n < 0 {
			return Usage{}, false
		}
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = addSat(u.PromptTokens, u.CompletionTokens)
	}
	return u, true
}

// StreamUsage follows a streamed response to settle it. It remembers the last
// usage the provider sends (the final chunk, when the request asked for it
// with stream_options.include_usage; a Responses stream's final event) and the
// last service tier a chunk names, and counts the completion text of every
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
	tier       string // the last service tier a chunk named
	started    *Usage // an Anthropic stream's prompt, as its message_start reported it
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
		ID          string          `json:"id"`
		Usage       *Usage          `json:"usage"`
		ServiceTier json.RawMessage `json:"service_tier"`
	} `json:"response"`
	// Item is the output item an event adds, whose id the provider keeps with the response.
	Item *struct {
		ID string `json:"id"`
	} `json:"item"`
	// Message is an Anthropic message_start event's message, whose usage counts the prompt.
	Message *struct {
		Usage *Usage `json:"usage"`
	} `json:"message"`

	Choices []chunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage"`
	// ServiceTier is a chat or completions chunk's service tier.
	ServiceTier json.RawMessage `json:"service_tier"`
}

// chunkChoice is one choice of a chat or completions chunk: a completion's text, or a chat's
// delta.
type chunkChoice struct {
	Text  string     `json:"text"`
	Delta chunkDelta `json:"delta"`
}

// chunkDelta is what a chat chunk's choice adds.
type chunkDelta struct {
	Content   string `json:"content"`
	Refusal   string `json:"refusal"`
	ToolCalls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
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
	if !plainChunk(data, &chunk) && json.Unmarshal(data, &chunk) != nil {
		return
	}
	s.done = s.done || finalEvents[chunk.Type]
	s.keep(&chunk)
	if chunk.Response != nil && chunk.Usage == nil {
		chunk.Usage, chunk.ServiceTier = chunk.Response.Usage, chunk.Response.ServiceTier
	}
	if tier := tierOf(chunk.ServiceTier); tier != "" {
		s.tier = tier
	}
	if chunk.Message != nil && chunk.Message.Usage != nil {
		if u, ok := chunk.Message.Usage.checked(); ok {
			s.started = &u
		}
	}
	if chunk.Usage != nil {
		if u, ok := chunk.Usage.checked(); ok {
			s.reported, s.isReported = s.withPrompt(u), true
		}
	}
	s.countChoices(&chunk)
	s.countAnthropicDelta(&chunk)
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

// finalEvents are the Responses events, and Anthropic's, that end a stream: nothing billed
// follows them.
var finalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true,
	"message_stop": true}

// withPrompt is u, an Anthropic message_delta's usage, with the prompt its message_start
// reported when u reports none: its output tokens alone, as Anthropic's API long sent them.
func (s *StreamUsage) withPrompt(u Usage) Usage {
	if s.started == nil || u.PromptTokens != 0 {
		return u
	}
	u.setPrompt(*s.started)
	u.TotalTokens = addSat(u.PromptTokens, u.CompletionTokens)
	return u
}

// setPrompt sets u's prompt tokens, of every class, to p's.
func (u *Usage) setPrompt(p Usage) {
	u.PromptTokens, u.CachedPromptTokens, u.AudioPromptTokens, u.CacheWriteTokens = p.PromptTokens, p.CachedPromptTokens, p.AudioPromptTokens, p.CacheWriteTokens
}

// anthropicDelta is what an Anthropic content_block_delta adds: text, a tool call's input as
// JSON, or thinking, each billed as output.
type anthropicDelta struct {
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
}

// countAnthropicDelta counts the completion an Anthropic content_block_delta adds.
func (s *StreamUsage) countAnthropicDelta(chunk *streamChunk) {
	if chunk.Type != "content_block_delta" || firstByte(chunk.Delta) != '{' {
		return
	}
	var d anthropicDelta
	if json.Unmarshal(chunk.Delta, &d) == nil {
		s.count(d.Text)
		s.count(d.PartialJSON)
		s.count(d.Thinking)
	}
}

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

// Usage returns the usage to settle with, at the service tier the stream last
// named, and true when the provider reported it. Otherwise it is the prompt
// tokens given to NewStreamUsage (or those an Anthropic stream's message_start
// reported) and the completion tokens counted so far.
func (s *StreamUsage) Usage() (Usage, bool) {
	if s.isReported {
		u := s.reported
		u.ServiceTier = s.tier
		return u, true
	}
	u := Usage{PromptTokens: s.prompt, CompletionTokens: s.completion, ServiceTier: s.tier}
	if s.started != nil {
		u.setPrompt(*s.started)
	}
	u.TotalTokens = addSat(u.PromptTokens, u.CompletionTokens)
	return u, false
}
