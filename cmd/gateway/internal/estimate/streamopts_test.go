package estimate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
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
		name:  "adds max_completion_tokens first and keeps the other fields as they are",
		body:  `{"model":"m","x-vendor":{"a":"<&>"},"messages":[]}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m","x-vendor":{"a":"<&>"},"messages":[]}`,
	}, {
		name:  "adds max_tokens",
		body:  `{"model":"m","prompt":"hi"}`,
		field: MaxTokens,
		want:  `{"max_tokens":256,"model":"m","prompt":"hi"}`,
	}, {
		name:  "adds a cap to an empty object",
		body:  `{}`,
		field: MaxTokens,
		want:  `{"max_tokens":256}`,
	}, {
		name:  "adds a cap to an empty object with spaces",
		body:  " {\n\t} ",
		field: MaxTokens,
		want:  " {\"max_tokens\":256\n\t} ",
	}, {
		name:  "the cap moves to the field the provider reads",
		body:  `{ "model" : "m", "max_tokens" : 256 }`,
		field: MaxCompletionTokens,
		want:  `{ "model" : "m", "max_completion_tokens" : 256 }`,
	}, {
		name:  "and back",
		body:  "{\n  \"model\": \"m\",\n  \"max_completion_tokens\":\t256\n}",
		field: MaxTokens,
		want:  "{\n  \"model\": \"m\",\n  \"max_tokens\":\t256\n}",
	}, {
		name:  "a cap in the field the provider reads stays",
		body:  `{"max_output_tokens":256,"input":"hi"}`,
		field: MaxOutputTokens,
		want:  `{"max_output_tokens":256,"input":"hi"}`,
	}, {
		name:  "only the top level's cap moves",
		body:  `{"messages":[{"role":"user","content":"hi","max_tokens":7}],"metadata":{"max_tokens":"8"},"max_tokens":256}`,
		field: MaxCompletionTokens,
		want:  `{"messages":[{"role":"user","content":"hi","max_tokens":7}],"metadata":{"max_tokens":"8"},"max_completion_tokens":256}`,
	}, {
		name:  "a cap's name in a string is no cap",
		body:  `{"model":"max_tokens","stop":["\"max_tokens\":1","\\"],"user":"{\"max_tokens\":2}"}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"max_tokens","stop":["\"max_tokens\":1","\\"],"user":"{\"max_tokens\":2}"}`,
	}, {
		name:  "escaped values stay as written",
		body:  `{"model":"m\u00e9","max_tokens":256,"messages":[{"content":"\u003cb\u003e"}]}`,
		field: MaxCompletionTokens,
		want:  `{"model":"m\u00e9","max_completion_tokens":256,"messages":[{"content":"\u003cb\u003e"}]}`,
	}, {
		// The other cases decode the body and encode it anew, in sorted order.
		name:  "a null cap is no cap",
		body:  `{"model":"m","max_tokens":null}`,
		field: MaxTokens,
		want:  `{"max_tokens":256,"model":"m"}`,
	}, {
		name:  "a cap of another value is set to n",
		body:  `{"model":"m","max_tokens":100}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "a cap written otherwise is set to n",
		body:  `{"model":"m","max_tokens":2.56e2}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "two caps become one",
		body:  `{"max_tokens":256,"model":"m","max_completion_tokens":256}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "a cap given twice becomes one",
		body:  `{"max_tokens":256,"model":"m","max_tokens":256}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "an escaped cap moves",
		body:  `{"max\u005ftokens":256,"model":"m"}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "an escaped key",
		body:  `{"mod\u0065l":"m","max_tokens":256}`,
		field: MaxCompletionTokens,
		want:  `{"max_completion_tokens":256,"model":"m"}`,
	}, {
		name:  "a key that differs from a cap only in case is no cap",
		body:  `{"Max_Tokens":256,"model":"m"}`,
		field: MaxCompletionTokens,
		want:  `{"Max_Tokens":256,"max_completion_tokens":256,"model":"m"}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pieces, err := WithMaxTokens([]byte(tc.body), tc.field, 256)
			if err != nil {
				t.Fatalf("WithMaxTokens: %v", err)
			}
			if got := bytes.Join(pieces, nil); string(got) != tc.want {
				t.Errorf("WithMaxTokens = %s, want %s", got, tc.want)
			}
			pieces, err = WithMaxTokensValid([]byte(tc.body), tc.field, 256)
			if got := bytes.Join(pieces, nil); err != nil || string(got) != tc.want {
				t.Errorf("WithMaxTokensValid = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestWithMaxTokensErrors(t *testing.T) {
	for _, body := range []string{`[1]`, `"max_tokens"`, `{"max_tokens":256,`, `{"model":"m"} {}`, ``} {
		if got, err := WithMaxTokens([]byte(body), MaxTokens, 256); !errors.As(err, new(*RequestError)) {
			t.Errorf("WithMaxTokens(%s) = %s, %v; want a *RequestError", body, got, err)
		}
	}
}

// FuzzWithMaxTokens checks that splicing the cap in gives the body that decoding and encoding
// it anew gives, as a provider reads it.
func FuzzWithMaxTokens(f *testing.F) {
	seeds := []string{
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi","max_tokens":1}]}`,
		`{"model":"m","messages":[]}`,
		`{ }`,
		`{"max_completion_tokens":16}`,
		`{"MAX_TOKENS":16,"a":"\"max_tokens\":"}`,
		`{"max\u005ftokens":16}`,
		`{"max_tokens":16,"max_tokens":16}`,
		`{"max_tokens":null,"b":[{},[]]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), byte(0), int64(16))
	}
	f.Fuzz(func(t *testing.T, body []byte, which byte, n int64) {
		field := capFields[int(which)%len(capFields)]
		pieces, ok := spliceCap(body, field, n, valid(body))
		if !ok {
			return
		}
		got := bytes.Join(pieces, nil)
		if !json.Valid(got) {
			t.Fatalf("spliceCap(%q, %s, %d) = %q, not valid JSON", body, field, n, got)
		}
		want, err := recodeCap(body, field, n)
		if err != nil {
			t.Fatalf("spliceCap(%q) = %q, but recodeCap refuses it: %v", body, got, err)
		}
		if diff := cmp.Diff(decoded(t, got), decoded(t, want)); diff != "" {
			t.Errorf("spliceCap(%q, %s, %d) = %q; decoded (-spliced +recoded):\n%s", body, field, n, got, diff)
		}
	})
}

// decoded is a JSON body as encoding/json reads it, numbers as written.
func decoded(t *testing.T, body []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// TestSpliceCapMatchesRecode checks spliceCap against recodeCap on objects made of the keys and
// values that could lead a scan astray: caps at the top level and deeper, in other cases, escaped,
// and named in strings.
func TestSpliceCapMatchesRecode(t *testing.T) {
	keys := []string{`"model"`, `"max_tokens"`, `"max_completion_tokens"`, `"max_output_tokens"`, `"MAX_TOKENS"`,
		`"max\u005ftokens"`, `"a\"b"`, `"messages"`, `"x\\"`}
	values := []string{`16`, `17`, `null`, `"max_tokens"`, `"\":16,\"max_tokens"`, `[{"max_tokens":16},"]"]`,
		`{"max_completion_tokens":{"max_tokens":[16]}}`, `"\\"`, `-1.5e3`, `true`, `{}`, `[]`}
	spaces := []string{"", " ", "\n\t"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	spliced := 0
	for range 5000 {
		var b strings.Builder
		b.WriteString(pick(spaces) + "{")
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pick(spaces) + pick(keys) + pick(spaces) + ":" + pick(spaces) + pick(values) + pick(spaces))
		}
		b.WriteString(pick(spaces) + "}")
		body, field := []byte(b.String()), pick(capFields)
		pieces, ok := spliceCap(body, field, 16, valid(body))
		if !ok {
			continue
		}
		got := bytes.Join(pieces, nil)
		spliced++
		want, err := recodeCap(body, field, 16)
		if err != nil {
			t.Fatalf("recodeCap(%s): %v", body, err)
		}
		if diff := cmp.Diff(decoded(t, got), decoded(t, want)); diff != "" {
			t.Errorf("spliceCap(%s, %s) = %s; decoded (-spliced +recoded):\n%s", body, field, got, diff)
		}
	}
	if spliced < 1000 {
		t.Errorf("%d of 5000 bodies spliced; want the table to reach the splice more often", spliced)
	}
}
