package anthropic

import (
	"encoding/json"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// Step is one event of a streamed answer and the output it carries.
type Step struct {
	// Event is the event, its name and its JSON.
	Event openai.Event
	// Output counts the output tokens the event carries, and Thinking
	// those of them the model thought.
	Output, Thinking int64
	// Paced is whether the model makes the event's output, so that a
	// stream pauses before it: each delta of text, thinking or a tool's
	// input, even an empty one.
	Paced bool
}

// Steps are a's events as a stream sends them, its usage u: message_start,
// whose usage counts the input and one output token; then each content
// block's content_block_start (a ping after the first), its deltas of up to
// 16 tokens, and content_block_stop; then message_delta, with the stop
// reason and the whole usage, and message_stop.
func (a Answer) Steps(u Usage) []Step {
	var s steps
	start := u
	start.OutputTokens, start.ThinkingTokens = 1, 0
	s.add(Step{Event: event("message_start", struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}{"message_start", a.envelope(start)})})
	if a.Thinking > 0 {
		s.thinking(a.Thinking, a.Signature)
	}
	if a.Tool != nil {
		s.tool(*a.Tool)
	} else {
		s.text(a.Text)
	}
	s.finish(a, u)
	return s.list
}

// steps are the steps of a stream as they are made.
type steps struct {
	list   []Step
	blocks int // content blocks started
}

func (s *steps) add(st Step) { s.list = append(s.list, st) }

// event is an event named typ whose JSON is v, which says typ again.
func event(typ string, v any) openai.Event {
	data, _ := json.Marshal(v) // the package's own types
	return openai.Event{Type: typ, Data: data}
}

// start starts a content block, shown as block, and returns its index.
func (s *steps) start(block any) int {
	i := s.blocks
	s.blocks++
	s.add(Step{Event: event("content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", i, block})})
	if i == 0 {
		s.add(Step{Event: event("ping", struct {
			Type string `json:"type"`
		}{"ping"})})
	}
	return i
}

// delta adds a delta of block i that carries output tokens, thinking of
// them; paced says the model makes them.
func (s *steps) delta(i int, delta any, output, thinking int64, paced bool) {
	s.add(Step{Event: event("content_block_delta", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}{"content_block_delta", i, delta}), Output: output, Thinking: thinking, Paced: paced})
}

func (s *steps) stop(i int) {
	s.add(Step{Event: event("content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", i})})
}

// thinking adds a thinking block of n tokens, in thinking_deltas, and then
// its signature.
func (s *steps) thinking(n int64, signature string) {
	i := s.start(thinkingBlock{Type: "thinking"})
	for _, piece := range openai.Chunks(openai.Filler(n)) {
		t := openai.TokensOf(piece)
		s.delta(i, struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
		}{"thinking_delta", piece}, t, t, true)
	}
	s.delta(i, struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}{"signature_delta", signature}, 0, 0, false)
	s.stop(i)
}

// text adds a text block, in text_deltas.
func (s *steps) text(text string) {
	i := s.start(textBlock{Type: "text"})
	for _, piece := range openai.Chunks(text) {
		s.delta(i, struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{"text_delta", piece}, openai.TokensOf(piece), 0, true)
	}
	s.stop(i)
}

// tool adds a tool_use block, its input in input_json_deltas.
func (s *steps) tool(t ToolUse) {
	i := s.start(newToolUseBlock(t, json.RawMessage("{}")))
	for _, piece := range openai.Chunks(string(t.Input)) {
		s.delta(i, struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		}{"input_json_delta", piece}, openai.TokensOf(piece), 0, true)
	}
	s.stop(i)
}

// finish adds message_delta and message_stop.
func (s *steps) finish(a Answer, u Usage) {
	type delta struct {
		StopReason   string    `json:"stop_reason"`
		StopSequence *string   `json:"stop_sequence"`
		StopDetails  *struct{} `json:"stop_details"`
	}
	s.add(Step{Event: event("message_delta", struct {
		Type  string `json:"type"`
		Delta delta  `json:"delta"`
		Usage usage  `json:"usage"`
	}{"message_delta", delta{StopReason: a.StopReason, StopSequence: nullable(a.StopSequence)}, u.deltaWire()})})
	s.add(Step{Event: event("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})})
}
