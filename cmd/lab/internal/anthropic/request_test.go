package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// pngOf is base64 PNG data of an image of w × h pixels.
func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// tokens are the Tokens of each block of p.
func tokens(p Prompt) []int64 {
	var n []int64
	for _, b := range p.Blocks {
		n = append(n, b.Tokens)
	}
	return n
}

func TestParseCountsThePrompt(t *testing.T) {
	const docTokens = 900
	tests := []struct {
		name       string
		body       string
		wantTokens []int64 // at the end of each block
		wantTTLs   []int   // the indexes of the breakpoints
	}{{
		name:       "a string system and a string message: ceil(bytes/4) of their text joined",
		body:       `{"system":"Be terse.","messages":[{"role":"user","content":"Summarise this page."}]}`, // 9 + 20 bytes
		wantTokens: []int64{3, 8},
	}, {
		name: "tools first, then system blocks, then each content block",
		body: `{"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],` + // {"input_schema":{"type":"object"},"name":"get_weather"}: 55 bytes
			`"system":[{"type":"text","text":"abcd"},{"type":"text","text":"efgh","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"12345678"}]},{"role":"assistant","content":"ok"}]}`,
		wantTokens: []int64{14, 15, 16, 18, 19}, // 55, 59, 63, 71, 73 bytes
		wantTTLs:   []int{2},
	}, {
		name: "an image of known size, a PDF, a tool call and its result",
		body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngOf(t, 300, 250) + `"}},` +
			`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},{"type":"text","text":"abcd"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"calc","input":{"x":1}}]},` + // calc{"x":1}: 11 bytes
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"}]}]}]}`,
		wantTokens: []int64{100, 100 + docTokens, 100 + docTokens + 1, 100 + docTokens + 4, 100 + docTokens + 5}, // 300 × 250 / 750 = 100
	}, {
		name:       "an image too large is scaled down, and costs at most ImageTokens; one by URL costs ImageTokens",
		body:       `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngOf(t, 1568, 400) + `"}},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`,
		wantTokens: []int64{837, 837 + ImageTokens}, // 1568 × 400 / 750 = 836.3
	}, {
		name:       "a text document counts its text; a request's own cache_control makes the last block a breakpoint",
		body:       `{"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"12345678"}}]}]}`,
		wantTokens: []int64{2},
		wantTTLs:   []int{0},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseCount([]byte(strings.Replace(tc.body, "{", `{"model":"m",`, 1)), docTokens)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tokens(req.Prompt), tc.wantTokens); diff != "" {
				t.Errorf("tokens at each block mismatch (-got +want):\n%s", diff)
			}
			if last := tc.wantTokens[len(tc.wantTokens)-1]; req.Prompt.Tokens != last {
				t.Errorf("prompt of %d tokens; want %d", req.Prompt.Tokens, last)
			}
			var ttls []int
			for i, b := range req.Prompt.Blocks {
				if b.TTL > 0 {
					ttls = append(ttls, i)
				}
			}
			if diff := cmp.Diff(ttls, tc.wantTTLs); diff != "" {
				t.Errorf("breakpoints mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestPrefixesAreTheirContent(t *testing.T) {
	sums := func(body string) []uint64 {
		t.Helper()
		req, err := ParseCount([]byte(body), 0)
		if err != nil {
			t.Fatal(err)
		}
		var s []uint64
		for _, b := range req.Prompt.Blocks {
			s = append(s, b.Sum)
		}
		return s
	}
	plain := sums(`{"model":"m","system":"rules","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]}`)
	marked := sums(`{"model":"m","system":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]},{"role":"assistant","content":"bye"}]}`)
	if diff := cmp.Diff(marked[:2], plain[:2]); diff != "" {
		t.Errorf("the same content as strings or blocks, with or without a breakpoint, has other prefixes (-got +want):\n%s", diff)
	}
	if marked[2] == plain[2] {
		t.Errorf("prompts that differ in their last block end with the same prefix")
	}
	other := sums(`{"model":"m","system":"rules","messages":[{"role":"assistant","content":"hello"}]}`)
	if other[1] == plain[1] {
		t.Errorf("the same text from another role has the same prefix")
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model: Field required"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{"max_tokens of zero", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "greater than or equal to 1"},
		{"no messages", `{"model":"m","max_tokens":5,"messages":[]}`, "at least one message"},
		{"a system role", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, "messages.0.role"},
		{"a block without a type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "with a type"},
		{"a thinking budget under 1,024", `{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":1000},"messages":[{"role":"user","content":"hi"}]}`, "1024"},
		{"a thinking budget of max_tokens", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"hi"}]}`, "must be greater than `thinking.budget_tokens`"},
		{"a temperature over 1", `{"model":"m","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, "temperature"},
		{"a ttl it does not know", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`, "cache_control.ttl"},
		{"an hour after five minutes", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, "must not come after"},
		{"five breakpoints", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + strings.Repeat(`{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},`, 4) +
			`{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]}`, "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"a tool_choice without tools", `{"model":"m","max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`, "while providing tools"},
		{"a tool_choice naming no tool", `{"model":"m","max_tokens":5,"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":"hi"}]}`, "Tool 'b' not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), 0)
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Type != "invalid_request_error" || !strings.Contains(e.Message, tc.want) {
				t.Errorf("Parse() error = %v; want a 400 invalid_request_error saying %q", err, tc.want)
			}
		})
	}
}

func TestParseFindsTheToolCall(t *testing.T) {
	const tools = `"tools":[{"type":"web_search_20250305","name":"web_search"},` +
		`{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"}},"required":["city","days"]}},` +
		`{"name":"get_time","input_schema":{"type":"object","properties":{"zone":{"type":"string"}}}}]`
	weather := &ToolCall{Name: "get_weather", Input: json.RawMessage(`{"city":"lab","days":1}`)}
	tests := []struct {
		name    string
		choice  string
		last    string // the last message
		want    *ToolCall
		wantErr bool
	}{
		{name: "auto, and the user names a tool", last: `{"role":"user","content":"What is get_time in Paris?"}`, want: &ToolCall{Name: "get_time", Input: json.RawMessage(`{}`)}},
		{name: "auto, and the user names none", last: `{"role":"user","content":"What is the weather?"}`},
		{name: "auto, and the last message is a tool's result", last: `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"get_weather"}]}`},
		{name: "any calls the first custom tool", choice: `{"type":"any"}`, last: `{"role":"user","content":"hi"}`, want: weather},
		{name: "tool calls the one it names", choice: `{"type":"tool","name":"get_weather"}`, last: `{"role":"user","content":"hi"}`, want: weather},
		{name: "none calls none", choice: `{"type":"none"}`, last: `{"role":"user","content":"get_weather"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":50,` + tools + `,"messages":[` + tc.last + `]`
			if tc.choice != "" {
				body += `,"tool_choice":` + tc.choice
			}
			req, err := Parse([]byte(body+"}"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(req.Tool, tc.want); diff != "" {
				t.Errorf("tool call mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestNewAnswer(t *testing.T) {
	weather := &ToolCall{Name: "get_weather", Input: json.RawMessage(`{"city":"lab"}`)} // 14 bytes: 4 tokens
	tests := []struct {
		name     string
		req      Request
		thinking int64
		answer   int64
		want     Answer
		output   int64
	}{
		{name: "text up to max_tokens", req: Request{MaxTokens: 5}, want: Answer{Text: "the lab has one big ", StopReason: StopMaxTokens}, output: 5},
		{name: "answer tokens end it first", req: Request{MaxTokens: 50}, answer: 3, want: Answer{Text: "the lab has ", StopReason: StopEndTurn}, output: 3},
		{name: "a stop sequence cuts it, the first one the text holds", req: Request{MaxTokens: 50, StopSequences: []string{"cat", "big"}}, answer: 8,
			want: Answer{Text: "the lab has one ", StopReason: StopSequence, StopSequence: "big"}, output: 4},
		{name: "thinking within the budget, then text", req: Request{MaxTokens: 3000, ThinkingBudget: 2000}, thinking: 100, answer: 2,
			want: Answer{Thinking: 100, Text: "the lab ", StopReason: StopEndTurn}, output: 102},
		{name: "no thinking without a budget", req: Request{MaxTokens: 3}, thinking: 100, want: Answer{Text: "the lab has ", StopReason: StopMaxTokens}, output: 3},
		{name: "a tool call", req: Request{MaxTokens: 50, Tool: weather}, want: Answer{Tool: &ToolUse{ToolCall: *weather}, StopReason: StopToolUse}, output: 4},
		{name: "a tool call that does not fit is text", req: Request{MaxTokens: 3, Tool: weather}, want: Answer{Text: "the lab has ", StopReason: StopMaxTokens}, output: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewAnswer(tc.req, tc.thinking, tc.answer)
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Answer{}, "ID", "Signature"), cmpopts.IgnoreFields(ToolUse{}, "ID")); diff != "" {
				t.Errorf("NewAnswer() mismatch (-got +want):\n%s", diff)
			}
			if got.OutputTokens() != tc.output {
				t.Errorf("OutputTokens() = %d; want %d", got.OutputTokens(), tc.output)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	a := NewAnswer(Request{Model: "m", MaxTokens: 2000, ThinkingBudget: 1024, Tool: &ToolCall{Name: "f", Input: json.RawMessage(`{"q":"` + strings.Repeat("x", 70) + `"}`)}}, 20, 0)
	u := Usage{InputTokens: 7, OutputTokens: a.OutputTokens(), ThinkingTokens: 20}
	var names []string
	var output, thinking, paced int64
	for _, st := range a.Steps(u) {
		names = append(names, st.Event.Type)
		output, thinking = output+st.Output, thinking+st.Thinking
		if st.Paced {
			paced++
		}
		var typ struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(st.Event.Data, &typ); err != nil || typ.Type != st.Event.Type {
			t.Errorf("event %s carries %s", st.Event.Type, st.Event.Data)
		}
	}
	want := []string{"message_start",
		"content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // 20 tokens thought, and the signature
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", // 78 bytes of input
		"message_delta", "message_stop"}
	if diff := cmp.Diff(names, want); diff != "" {
		t.Errorf("events mismatch (-got +want):\n%s", diff)
	}
	if output != 40 || a.OutputTokens() != 40 || thinking != 20 || paced != 4 {
		t.Errorf("the steps carry %d output tokens of the answer's %d, %d thought, in %d paced steps; want 40, 20, 4", output, a.OutputTokens(), thinking, paced)
	}
}
