package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// MaxBodyBytes is the largest request body Read accepts: 32 MB, as
// Anthropic's Messages API.
const MaxBodyBytes = 32 << 20

// Request is what the simulator needs of one Messages request body.
type Request struct {
	// Model is the model asked for; never empty.
	Model string
	// MaxTokens is max_tokens, at least 1; 0 for a count_tokens request.
	MaxTokens int64
	// Stream asks for server-sent events.
	Stream bool
	// Prompt is the prompt: its tokens and its blocks, as the cache reads
	// them.
	Prompt Prompt
	// ThinkingBudget is the most the model may think before it answers:
	// thinking.budget_tokens when thinking is enabled, max_tokens - 1 when
	// it is adaptive, else 0.
	ThinkingBudget int64
	// Tool is the tool the answer calls, nil when it answers in text (see
	// the package doc for when it calls one).
	Tool *ToolCall
	// StopSequences are stop_sequences: the answer's text ends before the
	// first of them it holds.
	StopSequences []string
}

// ToolCall is a call the model makes to one of the request's tools.
type ToolCall struct {
	// Name is the tool's name.
	Name string
	// Input is what the call sends: an object holding each property the
	// tool's input_schema requires (see inputFor).
	Input json.RawMessage
}

// body is the part of a Messages or count_tokens body the simulator reads.
type body struct {
	Model     string          `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	StopSequences []string `json:"stop_sequences"`
	Temperature   *float64 `json:"temperature"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens *int64 `json:"budget_tokens"`
	} `json:"thinking"`
	CacheControl *cacheControl `json:"cache_control"`
}

// Read reads and parses a Messages request (see Parse) and checks that its
// model is one of models. It answers errors ready to write.
func Read(r *http.Request, models []string, documentTokens int64) (Request, *Error) {
	return read(r, models, func(data []byte) (Request, error) { return Parse(data, documentTokens) })
}

// ReadCount reads and parses a count_tokens request (see ParseCount) and
// checks that its model is one of models.
func ReadCount(r *http.Request, models []string, documentTokens int64) (Request, *Error) {
	return read(r, models, func(data []byte) (Request, error) { return ParseCount(data, documentTokens) })
}

func read(r *http.Request, models []string, parse func([]byte) (Request, error)) (Request, *Error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		return Request{}, TooLarge()
	} else if err != nil {
		return Request{}, InvalidRequest("We could not read the request body.")
	}
	req, err := parse(data)
	if err != nil {
		var bad *Error
		if !errors.As(err, &bad) {
			bad = InvalidRequest("We could not parse the request.")
		}
		return Request{}, bad
	}
	if !slices.Contains(models, req.Model) {
		return Request{}, UnknownModel(req.Model)
	}
	return req, nil
}

// Parse reads a Messages request body: its prompt, counted with
// documentTokens for each document it cannot read; its max_tokens, which
// it must have; its thinking; and the tool its answer calls. Its errors
// are [*Error] values with status 400.
func Parse(data []byte, documentTokens int64) (Request, error) {
	req, b, err := parse(data, documentTokens)
	if err != nil {
		return Request{}, err
	}
	if req.MaxTokens, err = b.maxTokens(); err != nil {
		return Request{}, err
	}
	if req.ThinkingBudget, err = b.thinkingBudget(req.MaxTokens); err != nil {
		return Request{}, err
	}
	if req.Tool, err = b.toolCall(); err != nil {
		return Request{}, err
	}
	if t := b.Temperature; t != nil && (*t < 0 || *t > 1) {
		return Request{}, InvalidRequest("temperature: Input should be between 0 and 1")
	}
	req.Stream, req.StopSequences = b.Stream, b.StopSequences
	return req, nil
}

// ParseCount reads a count_tokens request body: its model and its prompt.
func ParseCount(data []byte, documentTokens int64) (Request, error) {
	req, _, err := parse(data, documentTokens)
	return req, err
}

// parse reads what every request has: a model and a prompt.
func parse(data []byte, documentTokens int64) (Request, body, error) {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return Request{}, body{}, InvalidRequest("The request body is not valid JSON.")
	}
	if b.Model == "" {
		return Request{}, body{}, InvalidRequest("model: Field required")
	}
	p, err := b.prompt(documentTokens)
	if err != nil {
		return Request{}, body{}, err
	}
	return Request{Model: b.Model, Prompt: p}, b, nil
}

// prompt writes the tools, the system and the messages, in the order the
// cache reads them, and checks the breakpoints.
func (b body) prompt(documentTokens int64) (Prompt, error) {
	if len(b.Messages) == 0 {
		return Prompt{}, InvalidRequest("messages: at least one message is required")
	}
	w := newPromptWriter(documentTokens)
	for _, raw := range b.Tools {
		if err := w.tool(raw); err != nil {
			return Prompt{}, err
		}
	}
	if err := w.system(b.System); err != nil {
		return Prompt{}, err
	}
	for i, m := range b.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return Prompt{}, InvalidRequest("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if err := w.message(m.Role, m.Content); err != nil {
			return Prompt{}, err
		}
	}
	p, err := b.breakAtEnd(w.prompt())
	if err != nil {
		return Prompt{}, err
	}
	return p, checkBreakpoints(p)
}

// breakAtEnd is p with its last block a breakpoint if the request has a
// cache_control of its own, as Anthropic's automatic caching does.
func (b body) breakAtEnd(p Prompt) (Prompt, error) {
	ttl, err := b.CacheControl.ttl()
	if err != nil || ttl == 0 || len(p.Blocks) == 0 {
		return p, err
	}
	if last := &p.Blocks[len(p.Blocks)-1]; last.TTL == 0 {
		last.TTL = ttl
	}
	return p, nil
}

// checkBreakpoints checks that p has at most MaxBreakpoints, and no
// breakpoint of an hour after one of five minutes.
func checkBreakpoints(p Prompt) error {
	if n := p.Breakpoints(); n > MaxBreakpoints {
		return InvalidRequest("A maximum of %d blocks with cache_control may be provided. Found %d.", MaxBreakpoints, n)
	}
	short := false
	for _, b := range p.Blocks {
		if b.TTL == TTL1h && short {
			return InvalidRequest("cache_control: a ttl of '1h' must not come after a ttl of '5m'")
		}
		short = short || b.TTL == TTL5m
	}
	return nil
}

func (b body) maxTokens() (int64, error) {
	switch {
	case b.MaxTokens == nil:
		return 0, InvalidRequest("max_tokens: Field required")
	case *b.MaxTokens < 1:
		return 0, InvalidRequest("max_tokens: Input should be greater than or equal to 1")
	}
	return *b.MaxTokens, nil
}

// minThinkingBudget is the smallest budget_tokens thinking may have.
const minThinkingBudget = 1024

// thinkingBudget is the most the model may think, within maxTokens.
func (b body) thinkingBudget(maxTokens int64) (int64, error) {
	t := b.Thinking
	switch {
	case t == nil:
		return 0, nil
	case t.Type == "adaptive":
		return maxTokens - 1, nil
	case t.Type != "enabled":
		return 0, nil
	case t.BudgetTokens == nil:
		return 0, InvalidRequest("thinking.enabled.budget_tokens: Field required")
	case *t.BudgetTokens < minThinkingBudget:
		return 0, InvalidRequest("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", minThinkingBudget)
	case *t.BudgetTokens >= maxTokens:
		return 0, InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
	}
	return *t.BudgetTokens, nil
}

// tool is a tool the model can call: a custom tool, not one of
// Anthropic's server tools, which have a type of their own.
type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// toolCall is the call the answer makes, if any: to the tool tool_choice
// names ("tool"), to the first custom tool ("any"), none ("none"), or,
// otherwise ("auto" or no tool_choice), to the first custom tool whose name
// the last message's text holds when that message is the user's.
func (b body) toolCall() (*ToolCall, error) {
	choice := "auto"
	if b.ToolChoice != nil {
		choice = b.ToolChoice.Type
	}
	tools := customTools(b.Tools)
	if choice != "auto" && choice != "none" && len(b.Tools) == 0 {
		return nil, InvalidRequest("tool_choice: tool_choice may only be specified while providing tools.")
	}
	switch choice {
	case "none":
		return nil, nil
	case "any":
		return firstCall(tools, func(tool) bool { return true }), nil
	case "tool":
		if c := firstCall(tools, func(t tool) bool { return t.Name == b.ToolChoice.Name }); c != nil {
			return c, nil
		}
		return nil, InvalidRequest("tool_choice.name: Tool '%s' not found in tools", b.ToolChoice.Name)
	case "auto":
		text := b.lastUserText()
		return firstCall(tools, func(t tool) bool { return text != "" && strings.Contains(text, t.Name) }), nil
	}
	return nil, InvalidRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
}

func customTools(raws []json.RawMessage) []tool {
	var tools []tool
	for _, raw := range raws {
		var t tool
		if json.Unmarshal(raw, &t) == nil && (t.Type == "" || t.Type == "custom") {
			tools = append(tools, t)
		}
	}
	return tools
}

// firstCall is a call to the first of tools that ok accepts, or nil.
func firstCall(tools []tool, ok func(tool) bool) *ToolCall {
	for _, t := range tools {
		if ok(t) {
			return &ToolCall{Name: t.Name, Input: inputFor(t.InputSchema)}
		}
	}
	return nil
}

// lastUserText is the text of the last message, if it is the user's: a
// string, or its text blocks joined.
func (b body) lastUserText() string {
	last := b.Messages[len(b.Messages)-1]
	if last.Role != "user" {
		return ""
	}
	var s string
	if json.Unmarshal(last.Content, &s) == nil {
		return s
	}
	var blocks []block
	_ = json.Unmarshal(last.Content, &blocks) // the prompt has read them
	var text strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	return text.String()
}

// inputFor is the input a call sends to a tool of schema: an object with
// each required property, "lab" for a string (or a property of no type it
// knows), 1 for a number or an integer, true for a boolean, and an empty
// array or object.
func inputFor(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s) // a schema it cannot read requires nothing
	input := map[string]any{}
	for _, name := range s.Required {
		input[name] = valueOf(s.Properties[name].Type)
	}
	data, _ := json.Marshal(input) // strings, numbers, booleans and empty containers
	return data
}

func valueOf(typ any) any {
	switch typ {
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return "lab"
}
