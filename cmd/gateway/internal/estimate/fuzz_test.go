package estimate

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// fuzzEndpoints maps the fuzzer's endpoint byte to an endpoint.
var fuzzEndpoints = []Endpoint{Chat, Completions, Embeddings}

func FuzzParseAndEstimate(f *testing.F) {
	seeds := []string{
		cookbookChat,
		`{"model":"m","stream":true,"max_tokens":10,"n":2,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"detail":"low"}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{}"}}]}],"tools":[{"type":"function"}]}`,
		`{"model":"m","prompt":["a",[1,2]],"best_of":3,"suffix":"s"}`,
		`{"model":"m","prompt":[1,2,3],"max_completion_tokens":9223372036854775807}`,
		`{"model":"m","input":[[1],[2,3]]}`,
		`{"model":"m","max_tokens":-1}`,
		`{"model":5}`,
		`{"model":"m"`,
		`null`,
	}
	for i, s := range seeds {
		f.Add(byte(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, endpoint byte, body []byte) {
		e := fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)]
		r, err := Parse(e, body)
		if err != nil {
			checkRequestError(t, err)
		} else {
			checkRequest(t, r)
		}
		checkStreamUsage(t, body)
		if u, ok := ParseUsage(body); ok && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0) {
			t.Errorf("ParseUsage = %+v, want counts of zero or more", u)
		}
	})
}

// checkRequestError fails unless err is a RequestError of a known kind.
func checkRequestError(t *testing.T, err error) {
	t.Helper()
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RequestError", err, err)
	}
	kinds := []error{ErrMalformedJSON, ErrMissingModel, ErrWrongType, ErrInvalidValue, ErrAmbiguousKey, ErrUnsupportedField, ErrControlKey}
	for _, kind := range kinds {
		if errors.Is(err, kind) {
			return
		}
	}
	t.Fatalf("error %v is of no known kind", err)
}

// checkRequest fails unless r and its estimates are sound.
func checkRequest(t *testing.T, r *Request) {
	t.Helper()
	if r.Model == "" || r.N < 1 || r.MaxTokens < 0 || r.Prompt.Tokens < 0 {
		t.Fatalf("Parse = %+v, want a model, N of 1 or more and counts of zero or more", r)
	}
	for _, enc := range []string{"cl100k_base", ""} {
		est := r.Estimate(counter, enc, 256)
		if est.PromptTokens < 0 || est.CompletionTokens < 0 || est.Total() < est.PromptTokens {
			t.Fatalf("Estimate(%q) = %+v, want counts of zero or more", enc, est)
		}
	}
}

// checkStreamUsage feeds body to WithStreamUsage and StreamUsage.
func checkStreamUsage(t *testing.T, body []byte) {
	t.Helper()
	out, err := WithStreamUsage(body)
	if err != nil {
		checkRequestError(t, err)
	} else if !bytes.Equal(out, body) && !json.Valid(out) {
		t.Fatalf("WithStreamUsage returned invalid JSON")
	}
	s := NewStreamUsage(nil, "", 0)
	s.Observe(body)
	if u, _ := s.Usage(); u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 {
		t.Fatalf("StreamUsage = %+v, want counts of zero or more", u)
	}
}
