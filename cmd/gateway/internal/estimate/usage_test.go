package estimate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   Usage
		wantOK bool
	}{{
		name: "chat completion",
		body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}],
			"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"completion_tokens_details":{"reasoning_tokens":0}}}`,
		want: Usage{PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21}, wantOK: true,
	}, {
		name: "embeddings have no completion tokens",
		body: `{"object":"list","data":[],"usage":{"prompt_tokens":8,"total_tokens":8}}`,
		want: Usage{PromptTokens: 8, TotalTokens: 8}, wantOK: true,
	}, {
		name: "missing total is the sum",
		body: `{"usage":{"prompt_tokens":9,"completion_tokens":12}}`,
		want: Usage{PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21}, wantOK: true,
	}, {
		name: "no usage",
		body: `{"choices":[]}`,
	}, {
		name: "null usage",
		body: `{"usage":null}`,
	}, {
		name: "negative count",
		body: `{"usage":{"prompt_tokens":-1,"completion_tokens":12,"total_tokens":11}}`,
	}, {
		name: "count of the wrong type",
		body: `{"usage":{"prompt_tokens":"9"}}`,
	}, {
		name: "malformed",
		body: `{"usage":{"prompt_tokens":9`,
	}, {
		name: "empty",
		body: ``,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseUsage([]byte(tc.body))
			if ok != tc.wantOK {
				t.Errorf("ParseUsage ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParseUsage (-got +want):\n%s", diff)
			}
		})
	}
}

func TestStreamUsage(t *testing.T) {
	tests := []struct {
		name         string
		encoding     string
		prompt       int64
		events       []string
		want         Usage
		wantReported bool
	}{{
		name:     "final usage chunk",
		encoding: "cl100k_base",
		prompt:   100,
		events: []string{
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"}}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" world"}}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
			`[DONE]`,
		},
		want:         Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11},
		wantReported: true,
	}, {
		name:     "chat without usage counts the deltas",
		encoding: "cl100k_base",
		prompt:   9,
		events: []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
			` {"choices":[{"index":0,"delta":{"content":"hello"}}]} `,
			`{"choices":[{"index":0,"delta":{"content":" world"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`,
		},
		want: Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11},
	}, {
		name:     "completions without usage count the text",
		encoding: "o200k_base",
		prompt:   4,
		events: []string{
			`{"object":"text_completion","choices":[{"index":0,"text":"tiktoken is great!"}]}`,
			`{"object":"text_completion","choices":[{"index":0,"text":"","finish_reason":"length"}]}`,
			`[DONE]`,
		},
		want: Usage{PromptTokens: 4, CompletionTokens: 6, TotalTokens: 10},
	}, {
		name: "tool calls and refusals count, with the proxy",
		events: []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}`,
			`{"choices":[{"index":1,"delta":{"refusal":"No."}}]}`,
		},
		want: Usage{CompletionTokens: 3 + 4 + 1, TotalTokens: 8},
	}, {
		name:     "unreadable payloads are ignored",
		encoding: "cl100k_base",
		events:   []string{``, `{"choices":`, `: keep-alive`, `{"choices":[{"delta":{"content":"hello"}}]}`, `{"usage":{"prompt_tokens":-3}}`},
		want:     Usage{CompletionTokens: 1, TotalTokens: 1},
	}, {
		name:         "the last usage wins",
		events:       []string{`{"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, `{"usage":{"prompt_tokens":5,"completion_tokens":3}}`},
		want:         Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8},
		wantReported: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamUsage(counter, tc.encoding, tc.prompt)
			for _, event := range tc.events {
				s.Observe([]byte(event))
			}
			got, reported := s.Usage()
			if reported != tc.wantReported {
				t.Errorf("Usage reported = %v, want %v", reported, tc.wantReported)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Usage (-got +want):\n%s", diff)
			}
		})
	}
}

func TestStreamUsageZero(t *testing.T) {
	var s StreamUsage
	s.Observe([]byte(`{"choices":[{"delta":{"content":"hello world"}}]}`))
	got, reported := s.Usage()
	if reported {
		t.Error("Usage reported = true, want false")
	}
	if diff := cmp.Diff(got, Usage{CompletionTokens: 3, TotalTokens: 3}); diff != "" {
		t.Errorf("Usage (-got +want):\n%s", diff)
	}
}

// TestParseUsageFindsWhatDecodingFinds checks the one-scan reading of a body's usage against
// decoding the whole body.
func TestParseUsageFindsWhatDecodingFinds(t *testing.T) {
	bodies := []string{
		`{"id":"c","choices":[{"message":{"content":"\"usage\": {\"prompt_tokens\": 99}"}}],"usage":{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30}}`,
		`{"usage":{"prompt_tokens":1,"completion_tokens":2},"object":"usage"}`,
		`{"choices":[{"usage":{"prompt_tokens":7}}],"usage" : {"prompt_tokens":3,"completion_tokens":4,"total_tokens":7} }`,
		`{"data":[{"embedding":[0.1,-0.2]}],"usage":{"prompt_tokens":8,"total_tokens":8}}`,
		`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`,
		`{"Usage":{"prompt_tokens":5}}`,
		`{"usage":null}`,
		`{"usage":{"prompt_tokens":-1}}`,
		`{"a":"\\","usage":{"prompt_tokens":6}}`,
		`{"usage":{"prompt_tokens":1}`,
		`[{"usage":{"prompt_tokens":1}}]`,
		`{}`,
	}
	for _, body := range bodies {
		got, gotOK := ParseUsage([]byte(body))
		want, wantOK := parseUsageWhole([]byte(body))
		if got != want || gotOK != wantOK {
			t.Errorf("ParseUsage(%s) = %+v, %v; decoding the whole body gives %+v, %v", body, got, gotOK, want, wantOK)
		}
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30}}`))
	f.Add([]byte(`{"x":"\"usage\":{","usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantOK := parseUsageWhole(body)
		if !wantOK {
			return // a body that does not decode may still carry a usage the scan finds
		}
		if got, ok := ParseUsage(body); got != want || !ok {
			t.Errorf("ParseUsage(%q) = %+v, %v; decoding the whole body gives %+v", body, got, ok, want)
		}
	})
}

// TestPlainUsageMatchesJSON checks plainUsage against encoding/json on usage objects made of
// the keys and values that could tell them apart.
func TestPlainUsageMatchesJSON(t *testing.T) {
	keys := []string{`"prompt_tokens"`, `"completion_tokens"`, `"total_tokens"`, `"input_tokens"`, `"output_tokens"`,
		`"Prompt_Tokens"`, `"TOTAL_TOKENS"`, `"prompt\u005ftokens"`, `"completion_tokens_details"`, `"x"`}
	values := []string{`0`, `9`, `-1`, `-0`, `123456789012345678`, `1234567890123456789`, `9223372036854775808`,
		`1.0`, `1e2`, `"9"`, `null`, `true`, `{"reasoning_tokens":0,"total_tokens":"x"}`, `[1,{"prompt_tokens":2}]`}
	spaces := []string{"", " ", "\n\t"}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	plain := 0
	for range 5000 {
		var b strings.Builder
		b.WriteString(pick(spaces) + "{")
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pick(spaces) + pick(keys) + pick(spaces) + ":" + pick(spaces) + pick(values) + pick(spaces))
		}
		b.WriteString(pick(spaces) + "}")
		raw := []byte(b.String())
		got, ok := plainUsage(raw)
		if !ok {
			continue
		}
		plain++
		var want Usage
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("plainUsage(%s) = %+v, but encoding/json refuses it: %v", raw, got, err)
		}
		if got != want {
			t.Errorf("plainUsage(%s) = %+v; encoding/json reads %+v", raw, got, want)
		}
	}
	if plain < 1000 {
		t.Errorf("plainUsage read %d of 5000 objects; want the table to reach it more often", plain)
	}
}

func FuzzPlainUsage(f *testing.F) {
	f.Add([]byte(`{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30,"completion_tokens_details":{"reasoning_tokens":0}}`))
	f.Add([]byte(`{"input_tokens":1,"output_tokens":2,"Total_Tokens":null}`))
	f.Add([]byte(`{"prompt_tokens":-0,"x":[1,"}"]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainUsage(raw)
		if !ok {
			return
		}
		var want Usage
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("plainUsage(%q) = %+v, but encoding/json refuses it: %v", raw, got, err)
		}
		if got != want {
			t.Errorf("plainUsage(%q) = %+v; encoding/json reads %+v", raw, got, want)
		}
	})
}

func TestStreamUsageDone(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   bool
	}{
		{name: "chat ends at [DONE]", events: []string{`{"choices":[{"delta":{"content":"hi"}}]}`, ` [DONE] `}, want: true},
		{name: "a chat stream not ended", events: []string{`{"choices":[{"delta":{"content":"hi"}}]}`}},
		{name: "a Responses stream ends at response.completed",
			events: []string{`{"type":"response.output_text.delta","delta":"hi"}`, `{"type":"response.completed","response":{"usage":{"input_tokens":3,"output_tokens":1}}}`}, want: true},
		{name: "or response.incomplete", events: []string{`{"type":"response.incomplete","response":{}}`}, want: true},
		{name: "or response.failed", events: []string{`{"type":"response.failed","response":{}}`}, want: true},
		{name: "a Responses stream not ended", events: []string{`{"type":"response.created","response":{}}`, `{"type":"response.output_text.done"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamUsage(counter, "o200k_base", 0)
			for _, event := range tc.events {
				s.Observe([]byte(event))
			}
			if got := s.Done(); got != tc.want {
				t.Errorf("Done() = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestUsageWithin(t *testing.T) {
	chat, err := Parse(Chat, []byte(`{"model":"m","max_tokens":5,"n":2,"messages":[{"role":"user","content":"Hello."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := chat.Estimate(counter, "o200k_base", 0)
	if want := chat.Size + chat.Prompt.Tokens; e.MaxPromptTokens != want {
		t.Fatalf("MaxPromptTokens = %d; want %d, the body's bytes and the tokens counted beside its text", e.MaxPromptTokens, want)
	}
	huge := int64(1e18)
	tests := []struct {
		name   string
		usage  Usage
		want   Usage
		wantOK bool
	}{
		{name: "within", usage: Usage{PromptTokens: 9, CompletionTokens: 10}, want: Usage{PromptTokens: 9, CompletionTokens: 10, TotalTokens: 19}, wantOK: true},
		{name: "completion past the cap times n", usage: Usage{PromptTokens: 9, CompletionTokens: 11},
			want: Usage{PromptTokens: 9, CompletionTokens: 10, TotalTokens: 19}},
		{name: "a lie of 10^18 each", usage: Usage{PromptTokens: huge, CompletionTokens: huge, TotalTokens: 2 * huge},
			want: Usage{PromptTokens: e.MaxPromptTokens, CompletionTokens: 10, TotalTokens: e.MaxPromptTokens + 10}},
		{name: "negative counts", usage: Usage{PromptTokens: -1, CompletionTokens: -1}, want: Usage{}},
		{name: "a sum past int64 saturates", usage: Usage{PromptTokens: math.MaxInt64, CompletionTokens: 10},
			want: Usage{PromptTokens: e.MaxPromptTokens, CompletionTokens: 10, TotalTokens: e.MaxPromptTokens + 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.usage.Within(e)
			if diff := cmp.Diff(got, tc.want); diff != "" || ok != tc.wantOK {
				t.Errorf("Within = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	responses, err := Parse(Responses, []byte(`{"model":"m","input":"Go on.","previous_response_id":"resp_1"}`))
	if err != nil {
		t.Fatal(err)
	}
	unbounded := Estimate{MaxPromptTokens: responses.Estimate(counter, "o200k_base", 16).MaxPromptTokens, CompletionTokens: 16}
	got, _ := Usage{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64}.Within(unbounded)
	if want := (Usage{PromptTokens: math.MaxInt64, CompletionTokens: 16, TotalTokens: math.MaxInt64}); got != want {
		t.Errorf("a Responses call's usage within its bounds = %+v; want %+v: its prompt bounded by arithmetic alone", got, want)
	}
}
