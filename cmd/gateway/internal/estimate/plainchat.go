package estimate

import (
	"encoding/json"
	"reflect"
)

// The kinds of the objects a plain chat request holds, found once.
var (
	chatBodyKind    = kindOf(reflect.TypeFor[chatBodyMessages]())
	chatMessageKind = kindOf(reflect.TypeFor[chatMessage]())
)

// plainChat reads body as parseChat's decoding and checkKeys do, and returns what they return,
// but in one pass and without reflection, when body is a plain chat request: a valid JSON object
// whose keys, and those of its messages, are unescaped ASCII, each given once and spelt as the
// API spells it, none another endpoint's cap, whose messages are an array of objects, whose
// model, service_tier, role, name and tool_call_id are strings of printable ASCII without
// escapes, stream a boolean, caps and n null or integers of at most 18 digits, and which has no
// stream_options.
// Such bodies are what SDKs send. It reports false for any other body, for encoding/json and
// checkKeys to read and to say what is wrong with it: plainChat refuses nothing itself.
//
// The raw values it returns are slices of body, where encoding/json copies them: what
// chatRequest builds of them holds no bytes of body, so nothing that changes body later (no
// function of the package does) reaches a Request.
func plainChat(body []byte) (b chatBodyMessages, unread int64, ok bool) {
	if !valid(body) {
		return chatBodyMessages{}, 0, false
	}
	r := plainReader{body: body, i: skipSpace(body, 0)}
	if !r.object(chatBodyKind, func(name string) bool { return r.chatField(&b, name) }) {
		return chatBodyMessages{}, 0, false
	}
	return b, r.unread, true
}

// embeddingsKind is the kind of an embeddings request's object, found once.
var embeddingsKind = kindOf(reflect.TypeFor[embeddingsBody]())

// plainEmbeddings reads body as read does into an embeddingsBody, and returns what it returns,
// but in one pass and without reflection, when body is a plain embeddings request (see
// plainChat): a valid JSON object whose keys are unescaped ASCII, each given once and spelt as
// the API spells it, none another endpoint's cap, and whose model is a string of printable
// ASCII without escapes. It reports false for any other body, for read to read.
func plainEmbeddings(body []byte) (b embeddingsBody, unread int64, ok bool) {
	if !valid(body) {
		return embeddingsBody{}, 0, false
	}
	r := plainReader{body: body, i: skipSpace(body, 0)}
	if !r.object(embeddingsKind, func(name string) bool { return r.embeddingsField(&b, name) }) {
		return embeddingsBody{}, 0, false
	}
	return b, r.unread, true
}

// embeddingsField reads the value of the field of an embeddings request that name names into b.
func (r *plainReader) embeddingsField(b *embeddingsBody, name string) bool {
	switch name {
	case "model":
		var ok bool
		b.Model, ok = r.text()
		return ok
	case "input":
		b.Input = r.raw()
		return true
	}
	return false
}

// plainReader reads a valid JSON body from body[i] on, as far as it is plain (see plainChat),
// and counts its unread keys as walker does.
type plainReader struct {
	body   []byte
	i      int
	unread int64
}

// chatField reads the value of the field of a chat request that name names into b.
// stream_options, and a field added to chatBodyMessages that it does not know, are left to
// encoding/json.
func (r *plainReader) chatField(b *chatBodyMessages, name string) bool {
	ok := true
	switch name {
	case "model":
		b.Model, ok = r.text()
	case "stream":
		b.Stream, ok = r.boolean()
	case "max_tokens":
		b.MaxTokens, ok = r.count()
	case "max_completion_tokens":
		b.MaxCompletionTokens, ok = r.count()
	case "n":
		b.N, ok = r.count()
	case "service_tier":
		b.ServiceTier, ok = r.text()
	case "tools":
		b.Tools = r.raw()
	case "functions":
		b.Functions = r.raw()
	case "response_format":
		b.ResponseFormat = r.raw()
	case "messages":
		b.Messages, ok = r.messages()
	default:
		return false
	}
	return ok
}

// messageField reads the value of the field of a message that name names into m.
func (r *plainReader) messageField(m *chatMessage, name string) bool {
	ok := true
	switch name {
	case "role":
		m.Role, ok = r.quoted()
	case "name":
		m.Name, ok = r.text()
	case "tool_call_id":
		m.ToolCallID, ok = r.text()
	case "content":
		m.Content = r.raw()
	case "tool_calls":
		m.ToolCalls = r.raw()
	case "function_call":
		m.FunctionCall = r.raw()
	default:
		return false
	}
	return ok
}

// messages reads an array of messages, each an object. An empty array is an empty slice, not
// nil, as encoding/json decodes it.
func (r *plainReader) messages() ([]chatMessage, bool) {
	if r.body[r.i] != '[' {
		return nil, false
	}
	messages := []chatMessage{}
	r.i++
	for {
		r.skipSpace()
		switch r.body[r.i] {
		case ']':
			r.i++
			return messages, true
		case ',':
			r.i++
			r.skipSpace()
		}
		var m chatMessage
		if !r.object(chatMessageKind, func(name string) bool { return r.messageField(&m, name) }) {
			return nil, false
		}
		messages = append(messages, m)
	}
}

// object reads the object at r.i, of kind k: field reads the value of each field given, by its
// name, and the other keys count as walker.unreadMember counts them.
func (r *plainReader) object(k *objectKind, field func(name string) bool) bool {
	if r.body[r.i] != '{' {
		return false
	}
	var seen uint64 // bit i: field i was given
	r.i++
	for {
		r.skipSpace()
		switch r.body[r.i] {
		case '}':
			r.i++
			return true
		case ',':
			r.i++
			r.skipSpace()
		}
		if !r.member(k, &seen, field) {
			return false
		}
	}
}

// member reads one key and its value. It reports false for a key that checkKeys would refuse
// (repeated, spelt with other cases, another endpoint's cap) and for one that is escaped or not
// ASCII, which encoding/json may match to a field in ways bytes do not show.
func (r *plainReader) member(k *objectKind, seen *uint64, field func(name string) bool) bool {
	end := stringEnd(r.body, r.i)
	key := r.body[r.i+1 : end-1]
	r.i = skipSpace(r.body, end) + 1 // past the colon
	r.skipSpace()
	if !plainKey(key) {
		return false
	}
	at, f := k.field(key)
	switch {
	case f == nil:
		return r.unreadMember(k, key)
	case string(key) != f.name || *seen&(1<<at) != 0:
		return false
	}
	*seen |= 1 << at
	return field(f.name)
}

// unreadMember passes over the value of a key no field reads, and counts it by k's rule.
func (r *plainReader) unreadMember(k *objectKind, key []byte) bool {
	if _, ok := k.foreign[string(key)]; ok {
		return false
	}
	start := r.i
	r.i = valueEnd(r.body, r.i)
	if k.counted && !k.free[string(key)] {
		r.unread = addSat(r.unread, proxyBytes(len(key)+r.i-start))
	}
	return true
}

// raw returns the value at r.i as a json.RawMessage holds it: its bytes, null included. Its
// capacity ends with it, so that appending to it cannot write over the rest of the body.
func (r *plainReader) raw() json.RawMessage {
	start := r.i
	r.i = valueEnd(r.body, r.i)
	return r.body[start:r.i:r.i]
}

// text returns the string at r.i when it is printable ASCII without escapes: its bytes are its
// text. It reports false for any other string, and for null, which encoding/json passes over.
func (r *plainReader) text() (string, bool) {
	q, ok := r.quoted()
	if !ok {
		return "", false
	}
	return string(q[1 : len(q)-1]), true
}

// quoted returns the string at r.i as text does, but as the body spells it, quotes and all: the
// body's own bytes, which a prompt counts without a copy.
func (r *plainReader) quoted() (json.RawMessage, bool) {
	if r.body[r.i] != '"' {
		return nil, false
	}
	start := r.i
	r.i = stringEnd(r.body, r.i)
	for _, c := range r.body[start+1 : r.i-1] {
		if c < ' ' || c > '~' || c == '\\' {
			return nil, false
		}
	}
	return r.body[start:r.i:r.i], true
}

// boolean returns the boolean at r.i. It reports false for null, which encoding/json passes over.
func (r *plainReader) boolean() (bool, bool) {
	start := r.i
	r.i = valueEnd(r.body, r.i)
	switch string(r.body[start:r.i]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// count returns the integer at r.i when it has at most 18 digits (see smallInt), or nil for
// null, as encoding/json decodes them into a *int64.
func (r *plainReader) count() (*int64, bool) {
	start := r.i
	r.i = valueEnd(r.body, r.i)
	value := r.body[start:r.i]
	if string(value) == "null" {
		return nil, true
	}
	n, ok := smallInt(value)
	if !ok {
		return nil, false
	}
	return &n, true
}

func (r *plainReader) skipSpace() { r.i = skipSpace(r.body, r.i) }

// plainKey reports whether key, as written between its quotes, is printable ASCII without
// escapes: such a key matches a field's name without regard to case exactly when
// bytes.EqualFold says so. A key with a control character is left to checkKeys to refuse.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c >= 0x7f || c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}
