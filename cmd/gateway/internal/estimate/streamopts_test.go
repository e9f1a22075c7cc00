package estimate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestWithStreamUsage(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{{
		name: "adds stream_options and keeps unknown fields",
		body: `{"model":"m","stream":true,"x-vendor":{"b":[1, 2.50, 12345678901234567890],"a":"\u00e9<&>"},
			"messages":[{"role":"user","content":"<b>Tom & Jerry</b>","cache_control":{"type":"ephemeral"}}],"seed":null}`,
		want: `{"messages":[{"role":"user","content":"<b>Tom & Jerry</b>","cache_control":{"type":"ephemeral"}}],"model":"m","seed":null,` +
			`"stream":true,"stream_options":{"include_usage":true},"x-vendor":{"b":[1,2.50,12345678901234567890],"a":"\u00e9<&>"}}`,
	}, {
		name: "keeps other stream options",
		body: `{"stream":true,"stream_options":{"include_obfuscation":false}}`,
		want: `{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`,
	}, {
		name: "turns include_usage on",
		body: `{"stream":true,"stream_options":{"include_usage":false}}`,
		want: `{"stream":true,"stream_options":{"include_usage":true}}`,
	}, {
		name: "null stream_options",
		body: `{"stream":true,"stream_options":null}`,
		want: `{"stream":true,"stream_options":{"include_usage":true}}`,
	}, {
		name: "already on: body unchanged",
		body: `{ "stream" : true , "stream_options" : { "include_usage" : true } }`,
		want: `{ "stream" : true , "stream_options" : { "include_usage" : true } }`,
	}, {
		name: "not streamed: body unchanged",
		body: `{ "model" : "m", "stream" : false }`,
		want: `{ "model" : "m", "stream" : false }`,
	}, {
		name: "stream absent: body unchanged",
		body: `{"model":"m"}`,
		want: `{"model":"m"}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WithStreamUsage([]byte(tc.body))
			if err != nil {
				t.Fatalf("WithStreamUsage: %v", err)
			}
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("WithStreamUsage (-got +want):\n%s", diff)
			}
		})
	}
}

func TestWithStreamUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want RequestError
	}{
		{"malformed", `{"stream":true,`, RequestError{Err: ErrMalformedJSON, Offset: 15}},
		{"not an object", `[1]`, RequestError{Err: ErrWrongType, Want: "an object"}},
		{"stream_options is a string", `{"stream":true,"stream_options":"usage"}`,
			RequestError{Err: ErrWrongType, Param: "stream_options", Want: "an object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WithStreamUsage([]byte(tc.body))
			if got != nil {
				t.Errorf("WithStreamUsage = %q, want nil", got)
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("WithStreamUsage error = %v (%T), want a *RequestError", err, err)
			}
			if diff := cmp.Diff(*re, tc.want, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("WithStreamUsage error (-got +want):\n%s", diff)
			}
		})
	}
}

func TestWithModel(t *testing.T) {
	got, err := WithModel([]byte(`{"model":"gpt-4o","messages":[],"x_unknown":{"a":1}}`), "gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"messages":[],"model":"gpt-4o-mini","x_unknown":{"a":1}}`; string(got) != want {
		t.Errorf("WithModel = %s; want %s", got, want)
	}
	if _, err := WithModel([]byte(`[1]`), "m"); err == nil {
		t.Error("WithModel of a non-object succeeded; want an error")
	}
}

func TestWithMaxTokens(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		field string
		want  string
	}{{
		name:  "adds max_completion_tokens and keeps unknown fields",
		body:  `{"model":"m","x-vendor":{"a":"<&>"},"messages":[]}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"messages":[],"model":"m","x-vendor":{"a":"<&>"}}`,
	}, {
		name:  "adds max_tokens",
		body:  `{"model":"m","prompt":"hi"}`,
		field: MaxTokens,
		want:  `{"max_tokens":256,"model":"m","prompt":"hi"}`,
	}, {
		name:  "a null cap is no cap",
		body:  `{"model":"m","max_tokens":null}`,
		field: MaxTokens,
		want:  `{"max_tokens":256,"model":"m"}`,
	}, {
		name:  "the cap moves to the field the provider reads",
		body:  `{ "model" : "m", "max_tokens" : 256 }`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "and back",
		body:  `{ "model" : "m", "max_completion_tokens" : 256 }`,
		field: MaxTokens,
		want:  `{"max_tokens":256,"model":"m"}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WithMaxTokens([]byte(tc.body), tc.field, 256)
			if err != nil {
				t.Fatalf("WithMaxTokens: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("WithMaxTokens = %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := WithMaxTokens([]byte(`[1]`), MaxTokens, 1); !errors.As(err, new(*RequestError)) {
		t.Errorf("WithMaxTokens of an array: error %v, want a *RequestError", err)
	}
}
