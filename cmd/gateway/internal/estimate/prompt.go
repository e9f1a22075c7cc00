package estimate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// completionsBody is what Parse reads from a completions request.
type completionsBody struct {
	options
	Prompt json.RawMessage `json:"prompt"`
	Suffix string          `json:"suffix"`
	BestOf *int64          `json:"best_of"`
}

// embeddingsBody is what Parse reads from an embeddings request.
type embeddingsBody struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

func parseCompletions(body []byte) (*Request, error) {
	var b completionsBody
	unread, err := read(body, &b)
	if err != nil {
		return nil, err
	}
	r, err := b.request(Completions, nil)
	if err != nil {
		return nil, err
	}
	bestOf, err := atLeastOne("best_of", b.BestOf)
	if err != nil {
		return nil, err
	}
	prompts, err := r.Prompt.addInputs(b.Prompt)
	if err != nil {
		return nil, within("prompt", err)
	}
	r.Prompt.addText(b.Suffix)
	r.Prompt.addTokens(unread)
	r.N = mulSat(max(r.N, bestOf), prompts)
	return r, nil
}

func parseEmbeddings(body []byte) (*Request, error) {
	b, unread, ok := plainEmbeddings(body)
	if !ok {
		var err error
		if unread, err = read(body, &b); err != nil {
			return nil, err
		}
	}
	if b.Model == "" {
		return nil, &RequestError{Err: ErrMissingModel, Param: "model"}
	}
	r := &Request{Endpoint: Embeddings, Model: b.Model, N: 1}
	if _, err := r.Prompt.addInputs(b.Input); err != nil {
		return nil, within("input", err)
	}
	r.Prompt.addTokens(unread)
	return r, nil
}

// addInputs adds a prompt or an input: a string, an array of strings, an
// array of token ids or an array of arrays of token ids. It returns how many
// prompts it held, at least 1.
func (p *Prompt) addInputs(raw json.RawMessage) (int64, error) {
	switch firstByte(raw) {
	case 0, 'n':
		return 1, nil
	case '"':
		return 1, p.addString(raw)
	case '[':
		return p.addInputArray(raw)
	}
	return 0, wrongType("a string or an array")
}

// addInputArray adds an array that is either one prompt of token ids or a
// batch of prompts.
func (p *Prompt) addInputArray(raw json.RawMessage) (int64, error) {
	elems, err := elements(raw)
	if err != nil {
		return 0, err
	}
	if len(elems) > 0 && isNumber(elems[0]) {
		return 1, p.addTokenIDs(raw)
	}
	for i, elem := range elems {
		if err := p.addInput(elem); err != nil {
			return 0, within(index(i), err)
		}
	}
	return max(int64(len(elems)), 1), nil
}

// elements returns the elements of raw, a JSON array, as decoding it into a []json.RawMessage
// would, but as slices of raw, found without decoding: a batch of inputs is read once, not
// copied. A raw that is not a valid array is decoded, for its error.
func elements(raw json.RawMessage) ([]json.RawMessage, error) {
	if firstByte(raw) != '[' || !valid(raw) {
		var elems []json.RawMessage
		return elems, decode(raw, &elems)
	}
	elems := []json.RawMessage{}
	for i := skipSpace(raw, 1); raw[i] != ']'; {
		end := valueEnd(raw, i)
		elems = append(elems, raw[i:end:end])
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return elems, nil
}

// addInput adds one prompt of a batch: a string or an array of token ids.
func (p *Prompt) addInput(raw json.RawMessage) error {
	switch firstByte(raw) {
	case '"':
		return p.addString(raw)
	case '[':
		return p.addTokenIDs(raw)
	}
	return wrongType("a string or an array of integers")
}

// addTokenIDs adds an array of token ids, one token each.
func (p *Prompt) addTokenIDs(raw json.RawMessage) error {
	var ids []int64
	if err := decode(raw, &ids); err != nil {
		return err
	}
	p.addTokens(int64(len(ids)))
	return nil
}

// addString adds a JSON string, valid JSON as every value is that the package reads once its
// body decoded; absent or null, it adds nothing.
func (p *Prompt) addString(raw json.RawMessage) error {
	text, err := stringText(raw)
	if err != nil {
		return err
	}
	p.addBytes(text)
	return nil
}

// addPartTexts adds the text and the refusal of a part of a content, strings each.
func (p *Prompt) addPartTexts(text, refusal json.RawMessage) error {
	if err := within("text", p.addString(text)); err != nil {
		return err
	}
	return within("refusal", p.addString(refusal))
}

// stringText returns the text of raw, a JSON string: raw's own bytes when it spells its text
// byte for byte (see plainBytes), else the text encoding/json decodes; nothing when raw is absent
// or null. It refuses any other value as encoding/json refuses it for a string.
func stringText(raw json.RawMessage) ([]byte, error) {
	if !isSet(raw) {
		return nil, nil
	}
	if text, ok := plainBytes(raw); ok {
		return text, nil
	}
	var s string
	if err := decode(raw, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// plainString is plainBytes as a string of its own.
func plainString(raw []byte) (string, bool) {
	text, ok := plainBytes(raw)
	return string(text), ok
}

// plainBytes returns the text of raw, a valid JSON string, when it has no escape and is valid
// UTF-8: encoding/json decodes such a string byte for byte. The text is raw's own bytes.
func plainBytes(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	text := raw[1 : len(raw)-1 : len(raw)-1]
	if bytes.IndexByte(text, '\\') >= 0 || !utf8.Valid(text) {
		return nil, false
	}
	return text, true
}

// addText adds text to count; empty text adds nothing.
func (p *Prompt) addText(text string) {
	if text != "" {
		p.addBytes([]byte(text))
	}
}

// addBytes adds text, which may be the body's own bytes, to count; empty text adds nothing.
func (p *Prompt) addBytes(text []byte) {
	if len(text) > 0 {
		p.Texts = append(p.Texts, text)
	}
}

// addTokens adds tokens known without counting.
func (p *Prompt) addTokens(n int64) {
	p.Tokens = addSat(p.Tokens, n)
}

// eachElement calls add with each element of a JSON array, and places what
// add refuses under the element's index.
func eachElement(raw json.RawMessage, add func(json.RawMessage) error) error {
	var elems []json.RawMessage
	if err := decode(raw, &elems); err != nil {
		return err
	}
	for i, elem := range elems {
		if err := add(elem); err != nil {
			return within(index(i), err)
		}
	}
	return nil
}

// firstByte returns the first byte of a JSON value, which tells its type, or
// 0 for an absent one. Values that encoding/json hands to a RawMessage start
// with no space.
func firstByte(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// isNumber reports whether a JSON value is a number.
func isNumber(raw json.RawMessage) bool {
	b := firstByte(raw)
	return b == '-' || (b >= '0' && b <= '9')
}
