package estimate

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// unquote returns the text of raw, a JSON string, decoded as encoding/json decodes one into a
// []byte of its own rather than a string, which would be copied once more to be held as a
// prompt's text: escapes read, a lone surrogate and invalid UTF-8 each replaced with U+FFFD. It
// reports false for anything that is not a JSON string.
func unquote(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	text := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\':
			var ok bool
			if text, i, ok = appendEscape(text, s, i); !ok {
				return nil, false
			}
		case c == '"' || c < ' ':
			return nil, false
		case c < utf8.RuneSelf:
			text = append(text, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				text = utf8.AppendRune(text, unicode.ReplacementChar)
			} else {
				text = append(text, s[i:i+size]...)
			}
			i += size
		}
	}
	return text, true
}

// appendEscape appends the character of the escape at s[i] to text, and returns where the
// escape ends. It reports false for an escape JSON does not have.
func appendEscape(text, s []byte, i int) ([]byte, int, bool) {
	if i+1 >= len(s) {
		return text, i, false
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return append(text, c), i + 2, true
	case 'b':
		return append(text, '\b'), i + 2, true
	case 'f':
		return append(text, '\f'), i + 2, true
	case 'n':
		return append(text, '\n'), i + 2, true
	case 'r':
		return append(text, '\r'), i + 2, true
	case 't':
		return append(text, '\t'), i + 2, true
	case 'u':
		r := hexRune(s[i:])
		if r < 0 {
			return text, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if pair := utf16.DecodeRune(r, hexRune(s[i:])); pair != unicode.ReplacementChar {
				return utf8.AppendRune(text, pair), i + 6, true
			}
			r = unicode.ReplacementChar
		}
		return utf8.AppendRune(text, r), i, true
	}
	return text, i, false
}

// hexRune returns the character of the \uXXXX escape that s begins with, or -1 when s begins
// with none.
func hexRune(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
