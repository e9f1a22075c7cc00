package estimate

import "encoding/binary"

// maxNesting is the deepest nesting of arrays and objects that valid accepts: encoding/json's.
const maxNesting = 10000

// valid reports whether data is one JSON value with white space around it, exactly as
// json.Valid does (which leaves the UTF-8 of strings unchecked, and refuses nesting past
// maxNesting), by recursive descent rather than encoding/json's scanner, which calls a state
// function for every byte: a long prompt is mostly string, whose plain bytes valid passes over
// in a tight loop.
func valid(data []byte) bool {
	end, ok := validValue(data, skipSpace(data, 0), 0)
	return ok && skipSpace(data, end) == len(data)
}

// validValue reads the value at data[i], at the given depth of nesting, and returns where it
// ends.
func validValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; {
	case c == '{':
		return validContainer(data, i, depth, '}', true)
	case c == '[':
		return validContainer(data, i, depth, ']', false)
	case c == '"':
		return validString(data, i)
	case c == '-' || isDigit(c):
		return validNumber(data, i)
	case c == 't':
		return validLiteral(data, i, "true")
	case c == 'f':
		return validLiteral(data, i, "false")
	case c == 'n':
		return validLiteral(data, i, "null")
	}
	return i, false
}

// validContainer reads the object (keyed) or array whose opening bracket is at data[i], up to
// its closing byte, and returns where it ends.
func validContainer(data []byte, i, depth int, closing byte, keyed bool) (int, bool) {
	if depth++; depth > maxNesting {
		return i, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == closing {
		return i + 1, true
	}
	for {
		var ok bool
		if keyed {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			if i, ok = validString(data, i); !ok {
				return i, false
			}
			if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
				return i, false
			}
			i = skipSpace(data, i+1)
		}
		if i, ok = validValue(data, i, depth); !ok {
			return i, false
		}
		switch i = skipSpace(data, i); {
		case i >= len(data):
			return i, false
		case data[i] == closing:
			return i + 1, true
		case data[i] != ',':
			return i, false
		}
		i = skipSpace(data, i+1)
	}
}

// validString reads the string whose opening quote is at data[i] and returns where it ends.
func validString(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		i = skipPlain(data, i)
		if i >= len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			n := escapeLength(data[i+1:])
			if n == 0 {
				return i, false
			}
			i += n
		}
	}
	return i, false
}

// Bytes of eight copies of a byte, for skipPlain.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// skipPlain returns the index of the first byte from data[i] on that ends a string's plain run
// (a quote, a backslash or a control character), or len(data): eight bytes at a time while none
// of them does.
func skipPlain(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		x := binary.LittleEndian.Uint64(data[i:])
		if below(x, 0x20)|below(x^('"'*ones), 1)|below(x^('\\'*ones), 1) != 0 {
			break
		}
	}
	for i < len(data) && data[i] != '"' && data[i] != '\\' && data[i] >= 0x20 {
		i++
	}
	return i
}

// below is not zero when a byte of x is below n, at most 0x80.
func below(x, n uint64) uint64 { return (x - n*ones) &^ x & highs }

// escapeLength is the length, after its backslash, of the escape that esc starts with; zero
// for none that JSON has.
func escapeLength(esc []byte) int {
	if len(esc) == 0 {
		return 0
	}
	switch esc[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(esc) < 5 {
			return 0
		}
		for _, h := range esc[1:5] {
			if !isDigit(h) && !('a' <= h && h <= 'f') && !('A' <= h && h <= 'F') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// validNumber reads the number at data[i]: a minus, an integer without leading zeros, a
// fraction and an exponent, the first and the last two optional.
func validNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data) || !isDigit(data[i]):
		return i, false
	case data[i] == '0':
		i++
	default:
		i = skipDigits(data, i)
	}
	if i < len(data) && data[i] == '.' {
		if i++; i >= len(data) || !isDigit(data[i]) {
			return i, false
		}
		i = skipDigits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		if i++; i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return i, false
		}
		i = skipDigits(data, i)
	}
	return i, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// validLiteral reads the literal word at data[i].
func validLiteral(data []byte, i int, word string) (int, bool) {
	if len(data)-i < len(word) || string(data[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}
