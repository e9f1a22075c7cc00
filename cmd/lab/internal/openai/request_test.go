package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		endpoint Endpoint
		body     string
		want     Request
	}{{
		name:     "chat: ceil(bytes/4) of the message contents, default completion",
		endpoint: Chat,
		body:     `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello!"}]}`,
		want:     Request{Endpoint: Chat, Model: "m", PromptTokens: 4, PromptText: "be briefhello!", CompletionTokens: 200, ServiceTier: "default"},
	}, {
		name:     "chat: text parts count, other parts do not; audio parts are counted apart",
		endpoint: Chat,
		body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcde"},{"type":"image_url","image_url":{"url":"x"}},` +
			`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]},{"role":"assistant","content":null}]}`,
		want: Request{Endpoint: Chat, Model: "m", PromptTokens: 2, PromptText: "abcde", AudioParts: 1, CompletionTokens: 200, ServiceTier: "default"},
	}, {
		name:     "chat: an answer in audio, at a tier",
		endpoint: Chat,
		body:     `{"model":"m","modalities":["text","audio"],"service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`,
		want:     Request{Endpoint: Chat, Model: "m", PromptTokens: 1, PromptText: "hi", Audio: true, CompletionTokens: 200, ServiceTier: "priority"},
	}, {
		name:     "chat: max_completion_tokens wins over max_tokens",
		endpoint: Chat,
		body:     `{"model":"m","max_tokens":50,"max_completion_tokens":7,"messages":[{"role":"user","content":"hi"}]}`,
		want:     Request{Endpoint: Chat, Model: "m", PromptTokens: 1, PromptText: "hi", CompletionTokens: 7, Capped: true, ServiceTier: "default"},
	}, {
		name:     "chat: stream with usage",
		endpoint: Chat,
		body:     `{"model":"m","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		want:     Request{Endpoint: Chat, Model: "m", Stream: true, IncludeUsage: true, PromptTokens: 1, PromptText: "hi", CompletionTokens: 5, Capped: true, ServiceTier: "default"},
	}, {
		name:     "chat: include_usage without stream means nothing",
		endpoint: Chat,
		body:     `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		want:     Request{Endpoint: Chat, Model: "m", PromptTokens: 1, PromptText: "hi", CompletionTokens: 200, ServiceTier: "default"},
	}, {
		name:     "completions: a string",
		endpoint: Completions,
		body:     `{"model":"m","prompt":"once upon a time"}`,
		want:     Request{Endpoint: Completions, Model: "m", PromptTokens: 4, CompletionTokens: 200},
	}, {
		name:     "completions: each prompt of an array counts alone",
		endpoint: Completions,
		body:     `{"model":"m","prompt":["a","bcdef"],"max_tokens":3}`,
		want:     Request{Endpoint: Completions, Model: "m", PromptTokens: 3, CompletionTokens: 3, Capped: true},
	}, {
		name:     "completions: token ids count one each",
		endpoint: Completions,
		body:     `{"model":"m","prompt":[[1,2],[3,4,5]]}`,
		want:     Request{Endpoint: Completions, Model: "m", PromptTokens: 5, CompletionTokens: 200},
	}, {
		name:     "embeddings: inputs, no completion, never streamed",
		endpoint: Embeddings,
		body:     `{"model":"e","input":["abcd","efgh1"],"stream":true}`,
		want:     Request{Endpoint: Embeddings, Model: "e", PromptTokens: 3, Inputs: 2},
	}, {
		name:     "embeddings: token ids are one input",
		endpoint: Embeddings,
		body:     `{"model":"e","input":[1,2,3]}`,
		want:     Request{Endpoint: Embeddings, Model: "e", PromptTokens: 3, Inputs: 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.endpoint, []byte(tc.body), 200)
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Parse() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	bad := func(param, msg string) *Error {
		return &Error{Status: 400, Type: "invalid_request_error", Param: param, Message: msg}
	}
	tests := []struct {
		name     string
		endpoint Endpoint
		body     string
		want     *Error
	}{
		{"malformed JSON", Chat, `{"model":`, bad("", "We could not parse the JSON body of your request.")},
		{"a field of the wrong type", Chat, `{"model":"m","stream":"yes"}`, bad("", "We could not parse the JSON body of your request.")},
		{"no model", Chat, `{"messages":[{"role":"user","content":"hi"}]}`, bad("model", "You must provide a model parameter.")},
		{"no messages", Chat, `{"model":"m","messages":[]}`, bad("messages", "Invalid 'messages': must be a non-empty array.")},
		{"content of the wrong type", Chat, `{"model":"m","messages":[{"content":7}]}`, bad("messages", "Invalid 'messages': content must be a string or an array of parts.")},
		{"max_tokens below 1", Chat, `{"model":"m","max_tokens":0,"messages":[{"content":"hi"}]}`, bad("max_tokens", "Invalid 'max_tokens': must be at least 1.")},
		{"no prompt", Completions, `{"model":"m"}`, bad("prompt", "Invalid 'prompt': must be a non-empty string, array of strings, array of token ids or array of such arrays.")},
		{"an empty input", Embeddings, `{"model":"m","input":""}`, bad("input", "Invalid 'input': must be a non-empty string, array of strings, array of token ids or array of such arrays.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.endpoint, []byte(tc.body), 200)
			if diff := cmp.Diff(err, error(tc.want)); diff != "" {
				t.Errorf("Parse() error mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestFillerCountsBackToItsTokens(t *testing.T) {
	for _, n := range []int64{0, 1, 7, 8, 200, 801} {
		if got := TokensOf(Filler(n)); got != n {
			t.Errorf("TokensOf(Filler(%d)) = %d; want %d", n, got, n)
		}
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{name: "empty is one piece", text: "", want: []string{""}},
		{name: "16 tokens are one piece", text: Filler(16), want: []string{Filler(16)}},
		{name: "17 tokens are two", text: Filler(17), want: []string{Filler(16), "the "}},
		{name: "runes are not cut", text: string(make([]byte, 63)) + "é", want: []string{string(make([]byte, 63)), "é"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(Chunks(tc.text), tc.want); diff != "" {
				t.Errorf("Chunks() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}
