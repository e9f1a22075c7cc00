package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// The stop reasons of an answer.
const (
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopSequence  = "stop_sequence"
	StopToolUse   = "tool_use"
)

// ServiceTier is the tier that serves every answer.
const ServiceTier = "standard"

// signatureDigits is the length of a thinking block's signature.
const signatureDigits = 32

// Answer is what the model answers one request: what it thinks, then its
// text or its call to a tool.
type Answer struct {
	// ID is the message's id, "msg_" and random hex digits.
	ID string
	// Model is the model that answers.
	Model string
	// Thinking counts the tokens the model thinks, which its thinking block
	// shows as filler text; 0 for none.
	Thinking int64
	// Signature is the thinking block's signature.
	Signature string
	// Text is the answer's text when it calls no tool: filler text.
	Text string
	// Tool is the answer's call to a tool; nil when it answers in text.
	Tool *ToolUse
	// StopReason is why it stopped: StopEndTurn, StopMaxTokens,
	// StopSequence or StopToolUse.
	StopReason string
	// StopSequence is the stop sequence it stopped before, if it did.
	StopSequence string
}

// ToolUse is a call to a tool, with the id its result must name.
type ToolUse struct {
	ID string
	ToolCall
}

// NewAnswer is the answer to req of a model that thinks up to thinking
// tokens, within req's budget, and then answers up to answer tokens of text
// (0 for up to max_tokens). A request that calls a tool gets the call
// instead of text when the call's input fits in what max_tokens leaves.
// Text that holds a stop sequence ends before it.
func NewAnswer(req Request, thinking, answer int64) Answer {
	a := Answer{ID: openai.NewID("msg_"), Model: req.Model, Thinking: min(max(thinking, 0), req.ThinkingBudget)}
	if a.Thinking > 0 {
		a.Signature = openai.NewID("")[:signatureDigits]
	}
	room := req.MaxTokens - a.Thinking
	if c := req.Tool; c != nil && openai.TokensOf(string(c.Input)) <= room {
		a.Tool, a.StopReason = &ToolUse{ID: openai.NewID("toolu_"), ToolCall: *c}, StopToolUse
		return a
	}
	n := room
	if answer > 0 {
		n = min(n, answer)
	}
	a.Text, a.StopReason = openai.Filler(n), StopEndTurn
	if n == room {
		a.StopReason = StopMaxTokens
	}
	if i, seq := firstStop(a.Text, req.StopSequences); i >= 0 {
		a.Text, a.StopReason, a.StopSequence = a.Text[:i], StopSequence, seq
	}
	return a
}

// firstStop is where the first of seqs in text begins, and which it is; -1
// if text holds none.
func firstStop(text string, seqs []string) (int, string) {
	at, first := -1, ""
	for _, seq := range seqs {
		if i := strings.Index(text, seq); seq != "" && i >= 0 && (at < 0 || i < at) {
			at, first = i, seq
		}
	}
	return at, first
}

// OutputTokens counts what a makes: its thinking, and its text or its
// call's input as JSON.
func (a Answer) OutputTokens() int64 {
	if a.Tool != nil {
		return a.Thinking + openai.TokensOf(string(a.Tool.Input))
	}
	return a.Thinking + openai.TokensOf(a.Text)
}

// Usage is an answer's usage as Anthropic reports it.
type Usage struct {
	// InputTokens counts the input neither read from nor written to the
	// cache.
	InputTokens int64
	// CacheReadTokens counts the input read from the cache.
	CacheReadTokens int64
	// CacheWrite5mTokens and CacheWrite1hTokens count the input written to
	// the cache for five minutes and for an hour.
	CacheWrite5mTokens, CacheWrite1hTokens int64
	// OutputTokens counts the output, thinking included.
	OutputTokens int64
	// ThinkingTokens counts the output the model thought.
	ThinkingTokens int64
}

// usage is Usage as its JSON shows it.
type usage struct {
	InputTokens              int64         `json:"input_tokens"`
	CacheCreationInputTokens int64         `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64         `json:"cache_read_input_tokens"`
	CacheCreation            *cacheWrites  `json:"cache_creation,omitempty"`
	OutputTokens             int64         `json:"output_tokens"`
	OutputTokensDetails      outputDetails `json:"output_tokens_details"`
	ServerToolUse            *struct{}     `json:"server_tool_use"`
	ServiceTier              string        `json:"service_tier,omitempty"`
	InferenceGeo             string        `json:"inference_geo,omitempty"`
	Speed                    string        `json:"speed,omitempty"`
}

type cacheWrites struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

type outputDetails struct {
	ThinkingTokens int64 `json:"thinking_tokens"`
}

// wire is u as a Message shows it.
func (u Usage) wire() usage {
	return usage{
		InputTokens: u.InputTokens, CacheCreationInputTokens: u.CacheWrite5mTokens + u.CacheWrite1hTokens, CacheReadInputTokens: u.CacheReadTokens,
		CacheCreation: &cacheWrites{u.CacheWrite5mTokens, u.CacheWrite1hTokens}, OutputTokens: u.OutputTokens,
		OutputTokensDetails: outputDetails{u.ThinkingTokens}, ServiceTier: ServiceTier, InferenceGeo: "not_available", Speed: "standard",
	}
}

// deltaWire is u as a message_delta shows it: its counts, cumulative.
func (u Usage) deltaWire() usage {
	j := u.wire()
	j.CacheCreation, j.ServiceTier, j.InferenceGeo, j.Speed = nil, "", "", ""
	return j
}

// message is the Message object.
type message struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Model        string    `json:"model"`
	Content      []any     `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	StopDetails  *struct{} `json:"stop_details"`
	Container    *struct{} `json:"container"`
	Diagnostics  *struct{} `json:"diagnostics"`
	Usage        usage     `json:"usage"`
}

type textBlock struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Citations []any  `json:"citations"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseBlock struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Caller struct {
		Type string `json:"type"`
	} `json:"caller"`
}

func newToolUseBlock(t ToolUse, input json.RawMessage) toolUseBlock {
	b := toolUseBlock{Type: "tool_use", ID: t.ID, Name: t.Name, Input: input}
	b.Caller.Type = "direct"
	return b
}

// message is a as a Message object, with usage u.
func (a Answer) message(u Usage) message {
	m := a.envelope(u)
	if a.Thinking > 0 {
		m.Content = append(m.Content, thinkingBlock{"thinking", openai.Filler(a.Thinking), a.Signature})
	}
	if a.Tool != nil {
		m.Content = append(m.Content, newToolUseBlock(*a.Tool, a.Tool.Input))
	} else {
		m.Content = append(m.Content, textBlock{Type: "text", Text: a.Text})
	}
	m.StopReason, m.StopSequence = &a.StopReason, nullable(a.StopSequence)
	return m
}

// envelope is a's Message without content or stop reason.
func (a Answer) envelope(u Usage) message {
	return message{ID: a.ID, Type: "message", Role: "assistant", Model: a.Model, Content: []any{}, Usage: u.wire()}
}

// nullable is s, or nil (JSON null) when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// WriteMessage answers w with a as a Message object, its usage u.
func WriteMessage(w http.ResponseWriter, a Answer, u Usage) {
	openai.WriteJSON(w, http.StatusOK, a.message(u))
}

// WriteCount answers a count_tokens request whose prompt has n tokens.
func WriteCount(w http.ResponseWriter, n int64) {
	openai.WriteJSON(w, http.StatusOK, struct {
		InputTokens int64 `json:"input_tokens"`
	}{n})
}
