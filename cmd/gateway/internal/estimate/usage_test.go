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
		name: "OpenAI's chat answer: cached prompt tokens, on the default tier",
		body: openAIChatAnswer,
		want: Usage{PromptTokens: 1117, CachedPromptTokens: 1024, CompletionTokens: 46, TotalTokens: 1163, ServiceTier: "default"}, wantOK: true,
	}, {
		name:   "OpenAI's Responses answer: cached input and reasoning, on the flex tier",
		body:   openAIResponsesAnswer,
		want:   Usage{PromptTokens: 1536, CachedPromptTokens: 1280, CompletionTokens: 1187, ReasoningTokens: 1152, TotalTokens: 2723, ServiceTier: "flex"},
		wantOK: true,
	}, {
		name: "an audio model's answer",
		body: `{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-4o-audio-preview-2024-12-17","choices":[],
			"usage":{"prompt_tokens":517,"completion_tokens":97,"total_tokens":614,
			"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":500},
			"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":79,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
			"service_tier":"priority","system_fingerprint":"fp_1"}`,
		want:   Usage{PromptTokens: 517, AudioPromptTokens: 500, CompletionTokens: 97, AudioCompletionTokens: 79, TotalTokens: 614, ServiceTier: "priority"},
		wantOK: true,
	}, {
		name:   "null details, and a tier that is not a string",
		body:   `{"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":null},"service_tier":7}`,
		want:   Usage{PromptTokens: 9, CompletionTokens: 1, TotalTokens: 10},
		wantOK: true,
	}, {
		name:   "an escaped tier is decoded",
		body:   `{"usage":{"prompt_tokens":9},"service_tier":"fl\u0065x"}`,
		want:   Usage{PromptTokens: 9, TotalTokens: 9, ServiceTier: "flex"},
		wantOK: true,
	}, {
		name: "a negative class",
		body: `{"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":-1}}}`,
	}, {
		name: "details of the wrong type",
		body: `{"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":4}}`,
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
		name:     "OpenAI's final usage chunk, its details and its tier",
		encoding: "o200k_base",
		prompt:   100,
		events: []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","service_tier":"priority","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","service_tier":"priority","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","service_tier":"priority","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","service_tier":"priority","system_fingerprint":"fp_1","choices":[],` +
				`"usage":{"prompt_tokens":1200,"completion_tokens":1,"total_tokens":1201,"prompt_tokens_details":{"cached_tokens":1152,"audio_tokens":0},` +
				`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
			`[DONE]`,
		},
		want:         Usage{PromptTokens: 1200, CachedPromptTokens: 1152, CompletionTokens: 1, TotalTokens: 1201, ServiceTier: "priority"},
		wantReported: true,
	}, {
		name:     "a stream without usage is counted at the tier it named",
		encoding: "cl100k_base",
		prompt:   9,
		events:   []string{`{"service_tier":"flex","choices":[{"index":0,"delta":{"content":"hello"}}]}`, `[DONE]`},
		want:     Usage{PromptTokens: 9, CompletionTokens: 1, TotalTokens: 10, ServiceTier: "flex"},
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
		openAIChatAnswer,
		openAIResponsesAnswer,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":5},"Prompt_Tokens_Details":{"audio_tokens":2}},"service_tier":"flex"}`,
		`{"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":5},"prompt_tokens_details":{"cached_tokens":0}}}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":5},"prompt_tokens_details":null}}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":"5"}}}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":[]}}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":01}}}`,
		`{"usage":{"prompt_tokens":9,"x":{"y":{"z":1}}},"Service_Tier":"priority","service_tier":null}`,
		`{"service_tier":"priority","usage":{"prompt_tokens":9},"service_tier":"fl\u0065x"}`,
		`{"service_tier":"caf\u00e9","usage":{"prompt_tokens":9}}`,
		`{"usage":{"prompt_tokens":9,"completion_tokens_details":{"reasoning_tokens":3,"audio_tokens":null}}}`,
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

// TestPlainUsageReadsOpenAIAnswers checks that OpenAI's answers, which always carry the details
// of their usage, are read without encoding/json.
func TestPlainUsageReadsOpenAIAnswers(t *testing.T) {
	for _, body := range []string{openAIChatAnswer, openAIResponsesAnswer} {
		raw, _ := answerValues([]byte(body))
		if _, ok := plainUsage(raw); !ok {
			t.Errorf("plainUsage(%s) = false; want it read in one pass", raw)
		}
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30}}`))
	f.Add([]byte(`{"x":"\"usage\":{","usage":{"prompt_tokens":1}}`))
	f.Add([]byte(openAIChatAnswer))
	f.Add([]byte(openAIResponsesAnswer))
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
		`"Prompt_Tokens"`, `"TOTAL_TOKENS"`, `"prompt\u005ftokens"`, `"completion_tokens_details"`, `"x"`,
		`"prompt_tokens_details"`, `"input_tokens_details"`, `"Output_Tokens_Details"`, `"prompt_tokens_detail\u0073"`}
	values := []string{`0`, `9`, `-1`, `-0`, `00`, `-`, `123456789012345678`, `1234567890123456789`, `9223372036854775808`,
		`1.0`, `1e2`, `"9"`, `"a\"b"`, `null`, `nul`, `true`, `{"reasoning_tokens":0,"total_tokens":"x"}`, `[1,{"prompt_tokens":2}]`,
		`{"cached_tokens":7,"audio_tokens":null}`, `{ "Audio_Tokens" : 3 , "reasoning_tokens":4}`, `{"cached_tokens":{"x":1}}`,
		`{"cached_tokens":1,}`, `{}`, `{"x":{}}`}
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
	f.Add([]byte(`{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}`))
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
		{name: "classes within their counts, and the tier, are kept",
			usage: Usage{PromptTokens: 9, CachedPromptTokens: 4, AudioPromptTokens: 2, CacheWriteTokens: 3, CompletionTokens: 10,
				ReasoningTokens: 6, AudioCompletionTokens: 4, ServiceTier: "flex"},
			want: Usage{PromptTokens: 9, CachedPromptTokens: 4, AudioPromptTokens: 2, CacheWriteTokens: 3, CompletionTokens: 10,
				ReasoningTokens: 6, AudioCompletionTokens: 4, TotalTokens: 19, ServiceTier: "flex"},
			wantOK: true},
		{name: "prompt classes past the prompt: audio, then cache writes, then cached tokens take what is left",
			usage: Usage{PromptTokens: 9, CachedPromptTokens: 9, AudioPromptTokens: 5, CacheWriteTokens: 3, CompletionTokens: 1},
			want:  Usage{PromptTokens: 9, CachedPromptTokens: 1, AudioPromptTokens: 5, CacheWriteTokens: 3, CompletionTokens: 1, TotalTokens: 10}},
		{name: "completion classes past the completion",
			usage: Usage{CompletionTokens: 10, ReasoningTokens: 11, AudioCompletionTokens: huge},
			want:  Usage{CompletionTokens: 10, ReasoningTokens: 10, AudioCompletionTokens: 10, TotalTokens: 10}},
		{name: "classes within a prompt that was past its bound are bound by the bound",
			usage: Usage{PromptTokens: huge, CachedPromptTokens: huge, CompletionTokens: 1},
			want:  Usage{PromptTokens: e.MaxPromptTokens, CachedPromptTokens: e.MaxPromptTokens, CompletionTokens: 1, TotalTokens: e.MaxPromptTokens + 1}},
		{name: "negative classes",
			usage: Usage{PromptTokens: 9, CachedPromptTokens: -1, AudioPromptTokens: math.MinInt64, CacheWriteTokens: -5, CompletionTokens: 1,
				ReasoningTokens: -1, AudioCompletionTokens: -1},
			want: Usage{PromptTokens: 9, CompletionTokens: 1, TotalTokens: 10}},
		{name: "classes of int64's largest",
			usage: Usage{PromptTokens: math.MaxInt64, CachedPromptTokens: math.MaxInt64, AudioPromptTokens: math.MaxInt64, CacheWriteTokens: math.MaxInt64,
				CompletionTokens: math.MaxInt64, ReasoningTokens: math.MaxInt64, AudioCompletionTokens: math.MaxInt64},
			want: Usage{PromptTokens: e.MaxPromptTokens, AudioPromptTokens: e.MaxPromptTokens, CompletionTokens: 10, ReasoningTokens: 10,
				AudioCompletionTokens: 10, TotalTokens: e.MaxPromptTokens + 10}},
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
	got, _ = Usage{PromptTokens: math.MaxInt64, CachedPromptTokens: math.MaxInt64, AudioPromptTokens: 1, CompletionTokens: 1}.Within(unbounded)
	if want := (Usage{PromptTokens: math.MaxInt64, CachedPromptTokens: math.MaxInt64 - 1, AudioPromptTokens: 1, CompletionTokens: 1, TotalTokens: math.MaxInt64}); got != want {
		t.Errorf("classes of a prompt of int64's largest = %+v; want %+v", got, want)
	}
}
