package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// jsonTrue is the JSON literal true.
var jsonTrue = json.RawMessage("true")

// WithStreamUsage returns body with stream_options.include_usage set to true,
// so that the provider ends the stream with a usage chunk. Every other field,
// known or not, keeps its value, and so do other stream options; fields come
// out in sorted order, without insignificant space.
//
// It returns body itself when stream is not true (providers refuse
// stream_options then) or when include_usage is already true. It refuses a
// body that is not a JSON object, or whose stream_options is not an object or
// null, with a [*RequestError].
func WithStreamUsage(body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := decode(body, &fields); err != nil {
		return nil, err
	}
	if !bytes.Equal(fields["stream"], jsonTrue) {
		return body, nil
	}
	var options map[string]json.RawMessage
	if err := decode(orNull(fields["stream_options"]), &options); err != nil {
		return nil, within("stream_options", err)
	}
	if bytes.Equal(options["include_usage"], jsonTrue) {
		return body, nil
	}
	if options == nil {
		options = make(map[string]json.RawMessage, 1)
	}
	options["include_usage"] = jsonTrue
	raw, err := encode(options)
	if err != nil {
		return nil, err
	}
	fields["stream_options"] = raw
	return encode(fields)
}

// orNull returns raw, or null for an absent value.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// encode marshals v without escaping HTML characters, so that strings keep
// their bytes.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("estimate: encode body: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// WithModel returns body with its model replaced, every other field kept as WithStreamUsage keeps
// them. It refuses a body that is not a JSON object with a [*RequestError].
func WithModel(body []byte, model string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := decode(body, &fields); err != nil {
		return nil, err
	}
	raw, err := encode(model)
	if err != nil {
		return nil, err
	}
	fields["model"] = raw
	return encode(fields)
}

// The fields that cap a completion.
const (
	// MaxCompletionTokens is OpenAI's chat field, which its reasoning models and its current
	// chat models require.
	MaxCompletionTokens = "max_completion_tokens"
	// MaxTokens is the completions endpoint's field, and the chat field that older models and
	// inference servers such as TGI read.
	MaxTokens = "max_tokens"
	// MaxOutputTokens is the Responses API's cap.
	MaxOutputTokens = "max_output_tokens"
)

// WithMaxTokens returns body with its completion cap in field, set to n, so that the provider
// reads the cap the estimate assumed in the field it reads; the other cap fields are dropped,
// since providers refuse two. Every other field is kept as WithStreamUsage keeps them. It refuses
// a body that is not a JSON object with a [*RequestError].
func WithMaxTokens(body []byte, field string, n int64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := decode(body, &fields); err != nil {
		return nil, err
	}
	raw, err := encode(n)
	if err != nil {
		return nil, err
	}
	delete(fields, MaxTokens)
	delete(fields, MaxCompletionTokens)
	delete(fields, MaxOutputTokens)
	fields[field] = raw
	return encode(fields)
}
