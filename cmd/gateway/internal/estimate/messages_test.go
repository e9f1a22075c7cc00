package estimate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMessages(t *testing.T) {
	tests := []struct {
		name       string
		endpoint   Endpoint
		body       string
		wantTexts  [][]byte
		wantTokens int64 // Prompt.Tokens
		wantMax    int64
		wantStream bool
	}{{
		name:      "a string of content",
		endpoint:  Messages,
		body:      `{"model":"claude-sonnet-5-5","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`,
		wantTexts: texts("Hello"), wantTokens: tokensPerMessage + tokensPerReply, wantMax: 64,
	}, {
		name:     "every block counted, system first",
		endpoint: Messages,
		body: `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"Weather?"}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"Look it up.","signature":"sig"},{"type":"redacted_thinking","data":"abcdefgh"},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Sunny"}]},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"A report."}},
				{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}]}]}`,
		wantTexts:  texts("Be brief.", "Weather?", "Look it up.", "get_weather", "Sunny", "A report."),
		wantTokens: 3*tokensPerMessage + tokensPerReply + 2 /* redacted data */ + 4 /* {"city":"Paris"} */ + documentTokens,
		wantMax:    10, wantStream: true,
	}, {
		name:       "tools add their JSON and the tool-use system prompt",
		endpoint:   Messages,
		body:       `{"model":"m","max_tokens":5,"tools":[{"name":"t","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]}`,
		wantTexts:  texts("x"),
		wantTokens: tokensPerMessage + tokensPerReply + 12 /* 45 bytes */ + toolUseTokens, wantMax: 5,
	}, {
		name:       "an unknown key counts as its JSON",
		endpoint:   Messages,
		body:       `{"model":"m","max_tokens":5,"x-vendor":"abcd","messages":[{"role":"user","content":"x"}]}`,
		wantTexts:  texts("x"),
		wantTokens: tokensPerMessage + tokensPerReply + 4, wantMax: 5,
	}, {
		name:     "count_tokens is free and takes no cap",
		endpoint: CountTokens,
		body:     `{"model":"m","messages":[{"role":"user","content":"How many?"}]}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.endpoint, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tc.wantTexts, r.Prompt.Texts); diff != "" {
				t.Errorf("texts (-want +got):\n%s", diff)
			}
			if r.Prompt.Tokens != tc.wantTokens || r.MaxTokens != tc.wantMax || r.Stream != tc.wantStream || r.Endpoint != tc.endpoint {
				t.Errorf("got tokens %d, max %d, stream %v, endpoint %s; want %d, %d, %v, %s",
					r.Prompt.Tokens, r.MaxTokens, r.Stream, r.Endpoint, tc.wantTokens, tc.wantMax, tc.wantStream, tc.endpoint)
			}
			e := r.Estimate(nil, "", 4096)
			if tc.endpoint == CountTokens && (e.PromptTokens != 0 || e.CompletionTokens != 0) {
				t.Errorf("count_tokens costs %+v; want nothing", e)
			}
			if tc.endpoint == Messages && e.CompletionTokens != tc.wantMax {
				t.Errorf("completion tokens %d; want max_tokens, %d", e.CompletionTokens, tc.wantMax)
			}
		})
	}
}

func TestParseMessagesRefuses(t *testing.T) {
	tests := []struct {
		name      string
		endpoint  Endpoint
		body      string
		want      error
		wantParam string
	}{
		{"no max_tokens", Messages, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, ErrInvalidValue, "max_tokens"},
		{"max_tokens of zero", Messages, `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, ErrInvalidValue, "max_tokens"},
		{"no model", Messages, `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, ErrMissingModel, "model"},
		{"no messages", Messages, `{"model":"m","max_tokens":1,"messages":[]}`, ErrInvalidValue, "messages"},
		{"max_tokens twice", Messages, `{"model":"m","max_tokens":1,"max_tokens":9000,"messages":[{"role":"user","content":"x"}]}`, ErrAmbiguousKey, "max_tokens"},
		{"a cap in another case", Messages, `{"model":"m","max_tokens":1,"Max_Tokens":9000,"messages":[{"role":"user","content":"x"}]}`, ErrAmbiguousKey, "Max_Tokens"},
		{"a model in another case", CountTokens, `{"Model":"m","messages":[{"role":"user","content":"x"}]}`, ErrAmbiguousKey, "Model"},
		{"stream twice", Messages, `{"model":"m","max_tokens":1,"stream":false,"stream":true,"messages":[{"role":"user","content":"x"}]}`, ErrAmbiguousKey, "stream"},
		{"a content in another case", Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x","Content":"y"}]}`, ErrAmbiguousKey, "messages[0].Content"},
		{"a block's text twice", Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`, ErrAmbiguousKey, "messages[0].content[0].text"},
		{"a system block's text in another case", Messages, `{"model":"m","max_tokens":1,"system":[{"type":"text","TEXT":"a"}],"messages":[{"role":"user","content":"x"}]}`, ErrAmbiguousKey, "system[0].TEXT"},
		{"a nested tool result's text twice", Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a","Text":"b"}]}]}]}`, ErrAmbiguousKey, "messages[0].content[0].content[0].Text"},
		{"an image source's data twice", Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"a","data":"b"}}]}]}`, ErrAmbiguousKey, "messages[0].content[0].source.data"},
		{"OpenAI's cap", Messages, `{"model":"m","max_tokens":1,"max_completion_tokens":1,"messages":[{"role":"user","content":"x"}]}`, ErrUnsupportedField, "max_completion_tokens"},
		{"content of the wrong type", Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":7}]}`, ErrWrongType, "messages[0].content"},
		{"a control character in a key", Messages, `{"model":"m","max_tokens":1,"model\u0000":"n","messages":[{"role":"user","content":"x"}]}`, ErrControlKey, "model\x00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.endpoint, []byte(tc.body))
			var re *RequestError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Param != tc.wantParam {
				t.Errorf("Parse() error = %v (param %q); want %v at %q", err, paramOf(err), tc.want, tc.wantParam)
			}
		})
	}
}

func paramOf(err error) string {
	var re *RequestError
	if errors.As(err, &re) {
		return re.Param
	}
	return ""
}

func TestMessagesImageTokens(t *testing.T) {
	block := func(w, h int) string {
		var buf bytes.Buffer
		if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
			base64.StdEncoding.EncodeToString(buf.Bytes()) + `"}}]}]}`
	}
	tests := []struct {
		name string
		body string
		want int64
	}{
		{"200 × 200", block(200, 200), 54},                             // 40,000 / 750
		{"1000 × 1000", block(1000, 1000), 1334},                       // 1,000,000 / 750
		{"3136 × 1568, scaled to 1568 × 784", block(3136, 1568), 1600}, // 1,229,312 / 750, past the most
		{"by URL", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`, anthropicImageTokens},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(Messages, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Prompt.Tokens - tokensPerMessage - tokensPerReply; got != tc.want {
				t.Errorf("the image counts %d tokens; want %d", got, tc.want)
			}
		})
	}
}

func TestParseAnthropicUsage(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Usage
	}{{
		name: "a message that read and wrote the cache: its prompt is the three counts together",
		body: `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn",
			"usage":{"input_tokens":20,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,
			"cache_creation":{"ephemeral_5m_input_tokens":2048,"ephemeral_1h_input_tokens":0},"output_tokens":50,"service_tier":"standard"}}`,
		want: Usage{PromptTokens: 6164, CachedPromptTokens: 4096, CacheWriteTokens: 2048, CompletionTokens: 50, TotalTokens: 6214},
	}, {
		name: "null cache counts",
		body: `{"type":"message","usage":{"input_tokens":20,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":5}}`,
		want: Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseUsage([]byte(tc.body))
			if !ok {
				t.Fatal("ParseUsage() reported no usage")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			whole, _ := parseUsageWhole([]byte(tc.body))
			if diff := cmp.Diff(got, whole); diff != "" {
				t.Errorf("the plain reading and encoding/json's differ (-plain +json):\n%s", diff)
			}
		})
	}
}

// anthropicStream is a streamed message as Anthropic sends it: the prompt's usage in
// message_start, the output's in message_delta.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-5-5","usage":{"input_tokens":10,"cache_creation_input_tokens":1024,"cache_read_input_tokens":2048,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"block":{"type":"thinking","thinking":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm, let me see"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello there"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Paris\"}"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}
`

func TestStreamUsageAnthropic(t *testing.T) {
	observe := func(s *StreamUsage, until string) {
		for _, line := range strings.Split(anthropicStream, "\n") {
			if until != "" && strings.Contains(line, until) {
				return
			}
			if data, ok := strings.CutPrefix(line, "data:"); ok {
				s.Observe([]byte(data))
			}
		}
	}
	t.Run("whole", func(t *testing.T) {
		s := NewStreamUsage(nil, "", 999)
		observe(s, "")
		got, ok := s.Usage()
		want := Usage{PromptTokens: 3082, CachedPromptTokens: 2048, CacheWriteTokens: 1024, CompletionTokens: 42, TotalTokens: 3124}
		if !ok || !s.Done() {
			t.Errorf("reported %v, done %v; want both", ok, s.Done())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
	t.Run("left before message_delta", func(t *testing.T) {
		s := NewStreamUsage(nil, "", 999)
		observe(s, `"message_delta"`)
		got, ok := s.Usage()
		// The prompt as message_start reported it; the output counted: 15, 11 and 17 bytes.
		want := Usage{PromptTokens: 3082, CachedPromptTokens: 2048, CacheWriteTokens: 1024, CompletionTokens: 4 + 3 + 5, TotalTokens: 3094}
		if ok || s.Done() {
			t.Errorf("reported %v, done %v; want neither", ok, s.Done())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
}
