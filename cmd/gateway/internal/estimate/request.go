package estimate

import (
	"encoding/json"
	"fmt"
)

// Endpoint names the API a request body is for: one of OpenAI's, or Anthropic's Messages.
type Endpoint string

// The endpoints Parse reads.
const (
	// Chat is /v1/chat/completions.
	Chat Endpoint = "chat"
	// Completions is /v1/completions.
	Completions Endpoint = "completions"
	// Embeddings is /v1/embeddings.
	Embeddings Endpoint = "embeddings"
	// Responses is /v1/responses.
	Responses Endpoint = "responses"
	// Moderations is /v1/moderations, which is free.
	Moderations Endpoint = "moderations"
	// Messages is Anthropic's /v1/messages.
	Messages Endpoint = "messages"
	// CountTokens is Anthropic's /v1/messages/count_tokens, which is free.
	CountTokens Endpoint = "count_tokens"
)

// Request is what the estimate needs from a request body, as Parse read it.
// The zero Request has no prompt and one completion of the default size.
// Estimate does not change a Request, so one may be estimated from several
// goroutines.
type Request struct {
	// Endpoint is the API the body was parsed for.
	Endpoint Endpoint
	// Model is the model the body names; never empty after Parse.
	Model string
	// Stream reports whether the client asked for a streamed response.
	Stream bool
	// MaxTokens is max_completion_tokens, else max_tokens (max_output_tokens
	// for Responses); 0 when the body sets none.
	MaxTokens int64
	// MaxTokensParam names the field MaxTokens came from; empty when the body
	// sets neither.
	MaxTokensParam string
	// N is the number of completions the provider generates and bills: n
	// (default 1); for completions, best_of when larger, times the number of
	// prompts in a batch. At least 1 after Parse.
	N int64
	// Prompt is what counts as prompt tokens.
	Prompt Prompt
	// ServiceTier is service_tier, the tier a chat or Responses request asks to be served at:
	// "auto", "default", "flex", "priority"; empty when the body sets none.
	ServiceTier string
	// Size is the body's length in bytes.
	Size int64
	// Kept is what a Responses request asks of what its provider keeps; nil for the other
	// endpoints.
	Kept *Kept
}

// Prompt is the part of a request that counts as prompt tokens: texts to
// count with an encoding, and tokens known without one.
//
// Texts hold the client's prompt: log Prompt only through its String method,
// which reports sizes.
type Prompt struct {
	// Texts are counted with the encoding, each on its own. A text the body spells without
	// escapes is the body's own bytes, not a copy of them: a long prompt is not held twice.
	// They are read, never written.
	Texts [][]byte `json:"-"`
	// Tokens are counted already: per-message overhead, images, token ids.
	Tokens int64
}

// String reports the size of the prompt, never its text.
func (p Prompt) String() string {
	var bytes int
	for _, t := range p.Texts {
		bytes += len(t)
	}
	return fmt.Sprintf("{%d texts, %d bytes, %d tokens}", len(p.Texts), bytes, p.Tokens)
}

// Parse reads the fields of body that the estimate needs, for endpoint. It
// refuses a body with a [*RequestError] when the body is not valid JSON, names
// no model, gives a field it reads the wrong type or a value out of range, a
// key it reads twice or spelt with other cases, or another endpoint's cap.
// The values of fields it does not read are not checked.
func Parse(endpoint Endpoint, body []byte) (*Request, error) {
	r, err := parse(endpoint, body)
	if err != nil {
		return nil, err
	}
	r.Size = int64(len(body))
	return r, nil
}

func parse(endpoint Endpoint, body []byte) (*Request, error) {
	switch endpoint {
	case Chat:
		return parseChat(body)
	case Completions:
		return parseCompletions(body)
	case Embeddings:
		return parseEmbeddings(body)
	case Responses:
		return parseResponses(body)
	case Moderations:
		return parseModerations(body)
	case Messages:
		return parseMessages(body)
	case CountTokens:
		return parseCountTokens(body)
	}
	return nil, fmt.Errorf("estimate: unknown endpoint %q", endpoint)
}

// options are the fields that chat and completions share.
type options struct {
	Model     string `json:"model"`
	Stream    bool   `json:"stream"`
	MaxTokens *int64 `json:"max_tokens"`
	N         *int64 `json:"n"`
	// StreamOptions is read when the gateway asks a stream for its usage (see WithStreamUsage):
	// as a field, its keys are checked as the others are.
	StreamOptions *streamOptions `json:"stream_options"`
}

// streamOptions are a stream's options as the gateway reads them.
type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

// request checks the options and returns a Request with them. maxCompletionTokens is chat's
// own cap, which it reads before max_tokens; nil for completions.
func (o *options) request(endpoint Endpoint, maxCompletionTokens *int64) (*Request, error) {
	if o.Model == "" {
		return nil, &RequestError{Err: ErrMissingModel, Param: "model"}
	}
	maxTokens, param, err := capOf(maxCompletionTokens, o.MaxTokens)
	if err != nil {
		return nil, err
	}
	n, err := atLeastOne("n", o.N)
	if err != nil {
		return nil, err
	}
	r := &Request{Endpoint: endpoint, Model: o.Model, Stream: o.Stream, MaxTokens: maxTokens, MaxTokensParam: param, N: n}
	return r, nil
}

// capOf returns max_completion_tokens or max_tokens, whichever is set, else 0, and the name of
// the field it came from. It refuses both together, as OpenAI does: providers read one or the
// other (TGI max_tokens only), and the call's cap would be the one its estimate did not count.
func capOf(maxCompletionTokens, maxTokens *int64) (int64, string, error) {
	if maxCompletionTokens != nil && maxTokens != nil {
		return 0, "", &RequestError{Err: ErrUnsupportedField, Param: MaxTokens, Want: "left out when max_completion_tokens is set: give one cap"}
	}
	param, v := MaxCompletionTokens, maxCompletionTokens
	if v == nil {
		param, v = MaxTokens, maxTokens
	}
	if v == nil {
		return 0, "", nil
	}
	if *v < 1 {
		return 0, "", &RequestError{Err: ErrInvalidValue, Param: param, Want: "1 or more"}
	}
	return *v, param, nil
}

// atLeastOne returns v, 1 when v is absent, and refuses v below 1.
func atLeastOne(param string, v *int64) (int64, error) {
	if v == nil {
		return 1, nil
	}
	if *v < 1 {
		return 0, &RequestError{Err: ErrInvalidValue, Param: param, Want: "1 or more"}
	}
	return *v, nil
}

// decode unmarshals body into v, refusing what encoding/json refuses.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fromJSON(err)
	}
	return nil
}
