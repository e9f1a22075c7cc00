package estimate

import (
	"bytes"
	"iter"
)

// member is one member of a JSON object's top level, as topMembers finds it.
type member struct {
	// key is the key between its quotes, its escapes as written.
	key []byte
	// at is where the key's opening quote is in the body.
	at int
	// value is the member's value, with the spaces around it; nil when the member is cut off:
	// the body, or a string in it, ends first, or the next key begins first.
	value []byte
}

// topMembers yields the members of the top level of the JSON object body, in order. It passes
// over the body once, following strings and depth without decoding anything, so that finding a
// member costs a scan rather than a decode. It does not check that body is valid JSON; a body
// that is not may yield anything, and yields a cut-off member last when a string in it does not
// end.
func topMembers(body []byte) iter.Seq[member] {
	return func(yield func(member) bool) {
		var m member
		depth, start := 0, -1 // start: where m's value starts, -1 when no member is open
		for i := 0; i < len(body); i++ {
			switch body[i] {
			case '"':
				end := stringEnd(body, i)
				if end < 0 {
					yield(member{at: i})
					return
				}
				if v := valueStart(body, end); depth == 1 && v >= 0 {
					if start >= 0 && !yield(m) { // m is cut off by this key
						return
					}
					m, start = member{key: body[i+1 : end-1], at: i}, v
				}
				i = end - 1
				continue
			case '{', '[':
				depth++
				continue
			case '}', ']':
				if depth--; depth != 0 {
					continue
				}
			case ',':
				if depth != 1 {
					continue
				}
			default:
				continue
			}
			if start >= 0 { // body[i] ends m's value
				m.value, start = body[start:i], -1
				if !yield(m) {
					return
				}
			}
		}
		if start >= 0 {
			yield(m) // cut off by the body's end
		}
	}
}

// stringEnd returns the index just past the JSON string that starts at body[i], or -1. It
// jumps from quote to quote, as a string's text (a prompt, a completion) is most of a body.
func stringEnd(body []byte, i int) int {
	for j := i + 1; j < len(body); j++ {
		k := bytes.IndexByte(body[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		if !escaped(body, i+1, j) {
			return j + 1
		}
	}
	return -1
}

// escaped reports whether the quote at body[q], in a string whose text starts at body[start], is
// escaped: a backslash escapes the character after it, so a quote after an odd number of them
// is part of the text.
func escaped(body []byte, start, q int) bool {
	n := 0
	for p := q - 1; p >= start && body[p] == '\\'; p-- {
		n++
	}
	return n%2 == 1
}

// valueStart returns where the value of the key that ends at body[end] starts, or -1 when the
// string there is not a key.
func valueStart(body []byte, end int) int {
	for i := end; i < len(body); i++ {
		switch body[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}
