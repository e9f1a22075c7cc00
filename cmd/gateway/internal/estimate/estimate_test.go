package estimate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cookbookChat is the example of OpenAI's cookbook "How to count tokens with
// tiktoken", for which the OpenAI API reported 129 prompt tokens on gpt-4
// (cl100k_base) and 124 on gpt-4o (o200k_base).
const cookbookChat = `{"model":"gpt-4","max_tokens":1,"messages":[
	{"role":"system","content":"You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
	{"role":"system","name":"example_user","content":"New synergies will help drive top-line growth."},
	{"role":"system","name":"example_assistant","content":"Things working well together will increase revenue."},
	{"role":"system","name":"example_user","content":"Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
	{"role":"system","name":"example_assistant","content":"Let's talk later when we're less busy about how to do better."},
	{"role":"user","content":"This late pivot means we don't have time to boil the ocean for the client deliverable."}
]}`

func TestEstimatePublished(t *testing.T) {
	tests := []struct {
		encoding string
		want     Estimate
	}{
		// By characters, every text counts ceil(bytes / 4): 660 bytes of text, 165 tokens.
		{"cl100k_base", Estimate{PromptTokens: 129, CompletionTokens: 1, CharacterPromptTokens: 165}},
		{"o200k_base", Estimate{PromptTokens: 124, CompletionTokens: 1, CharacterPromptTokens: 165}},
	}
	r, err := Parse(Chat, []byte(cookbookChat))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.encoding, func(t *testing.T) {
			got := r.Estimate(counter, tc.encoding, 1000)
			// TestUsageWithin checks the bound.
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Estimate{}, "MaxPromptTokens")); diff != "" {
				t.Errorf("Estimate (-got +want):\n%s", diff)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name       string
		endpoint   Endpoint
		body       string
		encoding   string
		defaultMax int64
		want       Estimate
	}{{
		name:       "max_tokens times n",
		endpoint:   Chat,
		body:       `{"model":"m","max_tokens":100,"n":3,"messages":[{"role":"user","content":"hello world"}]}`,
		encoding:   "cl100k_base",
		defaultMax: 4096,
		want:       Estimate{PromptTokens: 3 + 1 + 2 + 3, CompletionTokens: 300},
	}, {
		name:       "default when max_tokens is absent",
		endpoint:   Chat,
		body:       `{"model":"m","messages":[{"role":"user","content":"hello world"}]}`,
		encoding:   "o200k_base",
		defaultMax: 4096,
		want:       Estimate{PromptTokens: 9, CompletionTokens: 4096},
	}, {
		name:       "default for each of n",
		endpoint:   Chat,
		body:       `{"model":"m","n":2,"messages":[{}]}`,
		defaultMax: 10,
		want:       Estimate{PromptTokens: 3 + 3, CompletionTokens: 20},
	}, {
		name:     "proxy for an unknown encoding",
		endpoint: Completions,
		body:     `{"model":"m","prompt":"hello world","max_tokens":5}`,
		encoding: "llama3",
		want:     Estimate{PromptTokens: 3, CompletionTokens: 5},
	}, {
		name:     "batched completions",
		endpoint: Completions,
		body:     `{"model":"m","prompt":["hello world","tiktoken is great!"],"max_tokens":5,"n":2}`,
		encoding: "cl100k_base",
		want:     Estimate{PromptTokens: 8, CompletionTokens: 20},
	}, {
		name:     "token ids are exact whatever the encoding",
		endpoint: Completions,
		body:     `{"model":"m","prompt":[1,2,3,4,5],"max_tokens":1}`,
		encoding: "",
		want:     Estimate{PromptTokens: 5, CompletionTokens: 1},
	}, {
		name:       "embeddings have no completion",
		endpoint:   Embeddings,
		body:       `{"model":"m","input":["hello world","antidisestablishmentarianism"]}`,
		encoding:   "cl100k_base",
		defaultMax: 4096,
		want:       Estimate{PromptTokens: 8},
	}, {
		name:       "negative default counts zero",
		endpoint:   Chat,
		body:       `{"model":"m","messages":[{}]}`,
		defaultMax: -5,
		want:       Estimate{PromptTokens: 3 + 3},
	}, {
		name:     "overflow stops at the maximum",
		endpoint: Chat,
		body:     `{"model":"m","max_tokens":9223372036854775807,"n":2,"messages":[{}]}`,
		want:     Estimate{PromptTokens: 3 + 3, CompletionTokens: math.MaxInt64},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.endpoint, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := r.Estimate(counter, tc.encoding, tc.defaultMax)
			// TestEstimatePublished and TestEstimateNilCounter check the count by characters.
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Estimate{}, "CharacterPromptTokens", "MaxPromptTokens")); diff != "" {
				t.Errorf("Estimate (-got +want):\n%s", diff)
			}
		})
	}
}

func TestEstimateNilCounter(t *testing.T) {
	r := &Request{Endpoint: Chat, N: 1, Prompt: Prompt{Texts: texts("hello world"), Tokens: 3}}
	got := r.Estimate(nil, "cl100k_base", 7)
	if diff := cmp.Diff(got, Estimate{PromptTokens: 6, CompletionTokens: 7, CharacterPromptTokens: 6, MaxPromptTokens: 6}); diff != "" {
		t.Errorf("Estimate (-got +want):\n%s", diff)
	}
}

func TestEstimateTotal(t *testing.T) {
	tests := []struct {
		name string
		e    Estimate
		want int64
	}{
		{"zero", Estimate{}, 0},
		{"sum", Estimate{PromptTokens: 129, CompletionTokens: 1}, 130},
		{"overflow stops at the maximum", Estimate{PromptTokens: math.MaxInt64, CompletionTokens: 1}, math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.e.Total(); got != tc.want {
				t.Errorf("Total() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEstimateCharacterTotal(t *testing.T) {
	tests := []struct {
		name string
		e    Estimate
		want int64
	}{
		{"characters count more", Estimate{PromptTokens: 100, CompletionTokens: 10, CharacterPromptTokens: 300}, 310},
		{"the encoding counts more", Estimate{PromptTokens: 300, CompletionTokens: 10, CharacterPromptTokens: 100}, 110},
		{"overflow stops at the maximum", Estimate{CharacterPromptTokens: math.MaxInt64, CompletionTokens: 1}, math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.e.CharacterTotal(); got != tc.want {
				t.Errorf("CharacterTotal() = %d, want %d", got, tc.want)
			}
		})
	}
}
