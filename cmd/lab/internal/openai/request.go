package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// MaxBodyBytes is the largest request body Read accepts.
const MaxBodyBytes = 8 << 20

// Endpoint is one of the API's POST endpoints.
type Endpoint int

// The endpoints the simulators serve.
const (
	// Chat is POST /v1/chat/completions.
	Chat Endpoint = iota
	// Completions is POST /v1/completions.
	Completions
	// Embeddings is POST /v1/embeddings.
	Embeddings
)

// Path is e's URL path.
func (e Endpoint) Path() string {
	switch e {
	case Chat:
		return "/v1/chat/completions"
	case Completions:
		return "/v1/completions"
	}
	return "/v1/embeddings"
}

// Request is what the simulators need of one request body.
type Request struct {
	// Endpoint is where the request was sent.
	Endpoint Endpoint
	// Model is the model asked for; never empty.
	Model string
	// Stream asks for server-sent events (never for Embeddings).
	Stream bool
	// IncludeUsage is stream_options.include_usage: the stream ends with
	// a usage chunk.
	IncludeUsage bool
	// PromptTokens is the prompt's text by the package's proxy: for a
	// chat, its audio parts are counted apart (AudioParts).
	PromptTokens int64
	// PromptText is the text a chat's PromptTokens counts, in order: the
	// contents of its messages, joined. It is empty for the other
	// endpoints.
	PromptText string
	// AudioParts counts a chat's input_audio content parts: audio the
	// proxy does not count, for the simulator to bill.
	AudioParts int64
	// Audio is whether a chat asks for an answer in audio as well as text:
	// its modalities include "audio".
	Audio bool
	// ServiceTier is the tier that serves a chat: TierPriority or
	// TierFlex when its service_tier asks for one, else TierDefault.
	ServiceTier string
	// CompletionTokens is how many tokens the answer has: 0 for
	// Embeddings.
	CompletionTokens int64
	// Capped is whether the request set the completion's length, so the
	// answer finishes for "length" rather than "stop".
	Capped bool
	// Inputs is how many inputs an Embeddings request has.
	Inputs int
}

// Tokens is what the request costs by the proxy: prompt and completion
// tokens, audio parts apart.
func (r Request) Tokens() int64 { return r.PromptTokens + r.CompletionTokens }

// The service tiers a chat or a response is served at.
const (
	TierDefault  = "default"
	TierPriority = "priority"
	TierFlex     = "flex"
)

// tier is the tier that serves a request whose service_tier is asked:
// priority or flex as asked, and default for anything else ("auto" and
// absent included).
func tier(asked string) string {
	if asked == TierPriority || asked == TierFlex {
		return asked
	}
	return TierDefault
}

// body is the union of the fields read from the three endpoints' bodies.
type body struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	Messages            []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Modalities  []string        `json:"modalities"`
	ServiceTier string          `json:"service_tier"`
	Prompt      json.RawMessage `json:"prompt"`
	Input       json.RawMessage `json:"input"`
}

// Read reads and parses r's body for e (see Parse) and checks that its
// model is one of models. It answers errors ready to write.
func Read(r *http.Request, e Endpoint, defaultMaxTokens int64, models []string) (Request, *Error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		return Request{}, InvalidRequest("", "We could not read the request body.")
	}
	req, err := Parse(e, data, defaultMaxTokens)
	if err != nil {
		var bad *Error
		if !errors.As(err, &bad) {
			bad = InvalidRequest("", "We could not parse the request.")
		}
		return Request{}, bad
	}
	if !slices.Contains(models, req.Model) {
		return Request{}, UnknownModel(req.Model)
	}
	return req, nil
}

// Parse reads a request body sent to e. A completion without max_tokens or
// max_completion_tokens gets defaultMaxTokens. Its errors are [*Error]
// values with status 400 that name the field at fault.
func Parse(e Endpoint, data []byte, defaultMaxTokens int64) (Request, error) {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return Request{}, InvalidRequest("", "We could not parse the JSON body of your request.")
	}
	if b.Model == "" {
		return Request{}, InvalidRequest("model", "You must provide a model parameter.")
	}
	req := Request{Endpoint: e, Model: b.Model, Stream: b.Stream && e != Embeddings}
	req.IncludeUsage = req.Stream && b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	var err error
	if e == Chat {
		err = req.readChat(b)
	} else {
		req.PromptTokens, req.Inputs, err = inputTokens(e, b)
	}
	if err == nil && e != Embeddings {
		req.CompletionTokens, req.Capped, err = completionTokens(b, defaultMaxTokens)
	}
	if err != nil {
		return Request{}, err
	}
	return req, nil
}

// readChat reads what a chat's body says of its prompt, its answer's
// modalities and its tier.
func (r *Request) readChat(b body) error {
	text, audio, err := chatPrompt(b)
	if err != nil {
		return err
	}
	r.PromptText, r.PromptTokens, r.AudioParts = text, TokensOf(text), audio
	r.Audio = slices.Contains(b.Modalities, "audio")
	r.ServiceTier = tier(b.ServiceTier)
	return nil
}

// inputTokens counts the prompt of a request to Completions, or the input
// of one to Embeddings and how many inputs it has.
func inputTokens(e Endpoint, b body) (int64, int, error) {
	if e == Completions {
		n, _, err := countParam("prompt", b.Prompt)
		return n, 0, err
	}
	return countParam("input", b.Input)
}

// completionTokens is the completion's length and whether the request set it.
func completionTokens(b body, def int64) (int64, bool, error) {
	param, n := "max_completion_tokens", b.MaxCompletionTokens
	if n == nil {
		param, n = "max_tokens", b.MaxTokens
	}
	switch {
	case n == nil:
		return def, false, nil
	case *n < 1:
		return 0, false, InvalidRequest(param, "Invalid '%s': must be at least 1.", param)
	}
	return *n, true, nil
}

// chatPrompt is the text of a chat's messages, joined, and the audio parts
// they hold.
func chatPrompt(b body) (string, int64, error) {
	if len(b.Messages) == 0 {
		return "", 0, InvalidRequest("messages", "Invalid 'messages': must be a non-empty array.")
	}
	var text strings.Builder
	var audio int64
	for _, m := range b.Messages {
		n, ok := writeContent(&text, m.Content)
		if !ok {
			return "", 0, InvalidRequest("messages", "Invalid 'messages': content must be a string or an array of parts.")
		}
		audio += n
	}
	return text.String(), audio, nil
}

// writeContent writes the text of a message's content to text: a string,
// null, or an array of parts whose text parts count. It returns the
// content's input_audio parts.
func writeContent(text *strings.Builder, raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text.WriteString(s)
		return 0, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return 0, false
	}
	var audio int64
	for _, p := range parts {
		text.WriteString(p.Text)
		if p.Type == "input_audio" {
			audio++
		}
	}
	return audio, true
}

// errNoInput means a prompt or input that is missing or empty.
var errNoInput = errors.New("openai: no input")

// countParam counts a prompt or an input, given as a string, an array of
// strings, an array of token ids or an array of them, and says how many
// inputs there are.
func countParam(param string, raw json.RawMessage) (int64, int, error) {
	n, count, err := countInput(raw)
	if err != nil {
		return 0, 0, InvalidRequest(param, "Invalid '%s': must be a non-empty string, array of strings, array of token ids or array of such arrays.", param)
	}
	return n, count, nil
}

func countInput(raw json.RawMessage) (int64, int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return TokensOf(s), 1, nonEmpty(len(s))
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return int64(len(ids)), 1, nonEmpty(len(ids))
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		return sumTokens(strs), len(strs), nonEmpty(len(strs))
	}
	var arrays [][]int64
	if json.Unmarshal(raw, &arrays) == nil {
		return sumLengths(arrays), len(arrays), nonEmpty(len(arrays))
	}
	return 0, 0, errNoInput
}

func nonEmpty(n int) error {
	if n == 0 {
		return errNoInput
	}
	return nil
}

func sumTokens(strs []string) int64 {
	var n int64
	for _, s := range strs {
		n += TokensOf(s)
	}
	return n
}

func sumLengths(arrays [][]int64) int64 {
	var n int64
	for _, a := range arrays {
		n += int64(len(a))
	}
	return n
}
