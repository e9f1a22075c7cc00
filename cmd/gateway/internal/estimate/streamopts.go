package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
func WithModel(body []byte, model string) ([]byte, error) { return withField(body, "model", model) }

// WithoutStore returns a Responses body with "store": false, so that its provider keeps nothing
// of the call, every other field kept as WithStreamUsage keeps them. It refuses a body that is
// not a JSON object with a [*RequestError].
func WithoutStore(body []byte) ([]byte, error) { return withField(body, "store", false) }

// withField returns body with its top-level field name set to value.
func withField(body []byte, name string, value any) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := decode(body, &fields); err != nil {
		return nil, err
	}
	raw, err := encode(value)
	if err != nil {
		return nil, err
	}
	fields[name] = raw
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
// since providers refuse two. Every other field keeps its value. It refuses a body that is not
// a JSON object with a [*RequestError].
//
// The body comes out as pieces that make it one after another. A body whose top level holds no
// cap, or one cap of value n spelt as the API spells it, keeps its bytes but for the cap's key,
// renamed in place, or the cap, put first: its pieces are body's own bytes on either side of
// them, which a long prompt's body is not copied for. Any other body comes out in one piece, as
// WithStreamUsage makes it.
func WithMaxTokens(body []byte, field string, n int64) ([][]byte, error) {
	return withMaxTokens(body, field, n, valid(body))
}

// WithMaxTokensValid is WithMaxTokens of a body known to be one valid JSON value, such as a body
// [Parse] read without error: it is not checked again, which for a long prompt is most of what
// the splice costs.
func WithMaxTokensValid(body []byte, field string, n int64) ([][]byte, error) {
	return withMaxTokens(body, field, n, true)
}

// withMaxTokens is WithMaxTokens; isValid is whether body is valid JSON.
func withMaxTokens(body []byte, field string, n int64, isValid bool) ([][]byte, error) {
	if pieces, ok := spliceCap(body, field, n, isValid); ok {
		return pieces, nil
	}
	capped, err := recodeCap(body, field, n)
	if err != nil {
		return nil, err
	}
	return [][]byte{capped}, nil
}

// recodeCap is WithMaxTokens by decoding body and encoding it anew: the way that holds for any
// body.
func recodeCap(body []byte, field string, n int64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := decode(body, &fields); err != nil {
		return nil, err
	}
	raw, err := encode(n)
	if err != nil {
		return nil, err
	}
	for _, name := range capFields {
		delete(fields, name)
	}
	fields[field] = raw
	return encode(fields)
}

// capFields are the fields that cap a completion.
var capFields = []string{MaxTokens, MaxCompletionTokens, MaxOutputTokens}

// capNames are the names of capFields, in their order, as the bytes that a splice puts in a body:
// pieces of a body that its callers read and never write.
var capNames = [][]byte{[]byte(MaxTokens), []byte(MaxCompletionTokens), []byte(MaxOutputTokens)}

// spliceCap is WithMaxTokens without decoding body, for the bodies where a splice gives what
// decoding would: a valid JSON object whose top level holds no cap, or one cap of value n.
// It reports false for any other body, and for a field that is not a cap; isValid is whether
// body is valid JSON.
func spliceCap(body []byte, field string, n int64, isValid bool) ([][]byte, bool) {
	which := slices.Index(capFields, field)
	if which < 0 || !isValid {
		return nil, false
	}
	open := skipSpace(body, 0)
	if body[open] != '{' {
		return nil, false
	}
	found, ok := onlyCap(body)
	if !ok {
		return nil, false
	}
	var buf [20]byte
	value := strconv.AppendInt(buf[:0], n, 10)
	switch {
	case found.key == nil:
		return insertCap(body, open, field, value), true
	case bytes.Equal(bytes.TrimSpace(found.value), value):
		return [][]byte{body[: found.at+1 : found.at+1], capNames[which], body[found.at+1+len(found.key):]}, true
	}
	return nil, false
}

// onlyCap returns the cap at the top level of the JSON object body, or a member with a nil key
// when there is none. It reports false when the top level holds several caps, a key that
// differs from a cap's name only in case (encoding/json would read it as the cap, a provider
// may not), an escaped key (which may spell a cap), or is cut off.
func onlyCap(body []byte) (member, bool) {
	var found member
	for m := range topMembers(body) {
		if m.value == nil || bytes.IndexByte(m.key, '\\') >= 0 {
			return member{}, false
		}
		name := capMatching(m.key)
		if name == "" {
			continue
		}
		if found.key != nil || string(m.key) != name {
			return member{}, false
		}
		found = m
	}
	return found, true
}

// capMatching returns the cap whose name key matches as encoding/json matches keys, without
// regard to case, or "".
func capMatching(key []byte) string {
	for _, name := range capFields {
		if bytes.EqualFold(key, []byte(name)) {
			return name
		}
	}
	return ""
}

// insertCap returns the pieces of body, a JSON object whose brace is at body[open], with field
// set to value as its first member.
func insertCap(body []byte, open int, field string, value []byte) [][]byte {
	member := make([]byte, 0, len(field)+len(value)+4)
	member = append(append(append(append(member, '"'), field...), '"', ':'), value...)
	if body[skipSpace(body, open+1)] != '}' {
		member = append(member, ',')
	}
	return [][]byte{body[: open+1 : open+1], member, body[open+1:]}
}
