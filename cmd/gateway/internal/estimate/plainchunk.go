package estimate

import (
	"bytes"
	"encoding/json"
)

// The keys plainChunk reads at each level of a chunk: its own, a choice's and a delta's. They are
// every key encoding/json would match to a field of streamChunk there.
var (
	chunkKeys  = []string{"choices", "service_tier", "usage", "type", "delta", "response", "item", "message"}
	choiceKeys = []string{"text", "delta"}
	deltaKeys  = []string{"content", "refusal", "tool_calls"}
)

// plainChunk reads data into chunk as encoding/json does, but in one pass and without
// reflection, when data is a plain chat or completions chunk, as a stream sends it for each
// piece of text: a valid JSON object whose keys are unescaped ASCII, each of streamChunk's given
// at most once and spelt as it spells it, whose choices are null or an array of objects whose
// text, and whose delta's content and refusal, are strings or null, and whose usage, tool calls
// and Responses' and Anthropic's fields are null or absent. It reports false for any other data,
// for encoding/json to read: the chunk that carries the usage, a tool call's, another API's.
func plainChunk(data []byte, chunk *streamChunk) bool {
	if firstByte(data) != '{' || !valid(data) {
		return false
	}
	return plainMembers(data, chunkKeys, func(key string, value []byte) bool {
		switch key {
		case "choices":
			return plainChoices(value, &chunk.Choices)
		case "service_tier":
			chunk.ServiceTier = value
			return true
		case "delta":
			chunk.Delta = value // a json.RawMessage holds null as its text
		}
		return isNull(value)
	})
}

// plainChoices reads a chunk's choices, null or an array of plain choices (see plainChunk).
func plainChoices(value []byte, choices *[]chunkChoice) bool {
	if isNull(value) {
		return true
	}
	elems, err := elements(value)
	if err != nil {
		return false
	}
	*choices = make([]chunkChoice, len(elems))
	for i, elem := range elems {
		c := &(*choices)[i]
		if firstByte(elem) != '{' || !plainMembers(elem, choiceKeys, func(key string, value []byte) bool {
			if key == "text" {
				return plainText(value, &c.Text)
			}
			return plainDelta(value, &c.Delta)
		}) {
			return false
		}
	}
	return true
}

// plainDelta reads a choice's delta, null or an object of plain content and refusal.
func plainDelta(value []byte, d *chunkDelta) bool {
	if isNull(value) {
		return true
	}
	return firstByte(value) == '{' && plainMembers(value, deltaKeys, func(key string, value []byte) bool {
		switch key {
		case "content":
			return plainText(value, &d.Content)
		case "refusal":
			return plainText(value, &d.Refusal)
		}
		return isNull(value)
	})
}

// plainText reads a string, or null, which leaves text as it is, as encoding/json does.
func plainText(value []byte, text *string) bool {
	switch {
	case isNull(value):
		return true
	case firstByte(value) != '"':
		return false
	}
	if s, ok := plainString(value); ok {
		*text = s
		return true
	}
	return json.Unmarshal(value, text) == nil
}

// plainMembers calls read with each member of the valid JSON object obj whose key is one of
// keys, and passes over the others. It reports false, as soon as it finds one, for a key that is
// not printable ASCII without escapes, that matches one of keys in another case (as encoding/json
// matches keys) or one given before, or when read does.
func plainMembers(obj []byte, keys []string, read func(key string, value []byte) bool) bool {
	var seen uint64 // bit i: keys[i] was given
	for i := skipSpace(obj, 1); obj[i] != '}'; {
		end := stringEnd(obj, i)
		key := obj[i+1 : end-1]
		start := skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		stop := valueEnd(obj, start)
		if !plainKey(key) {
			return false
		}
		for k, name := range keys {
			if !bytes.EqualFold(key, []byte(name)) {
				continue
			}
			if string(key) != name || seen&(1<<k) != 0 || !read(name, obj[start:stop]) {
				return false
			}
			seen |= 1 << k
		}
		if i = skipSpace(obj, stop); obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// isNull reports whether a JSON value is null.
func isNull(value []byte) bool { return string(value) == "null" }
