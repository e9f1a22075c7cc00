package estimate

import (
	"unicode"
	"unicode/utf8"
)

// A splitter returns the length in bytes of the first piece of text, the
// part of it that the encoding's split pattern matches first. text is valid
// UTF-8 and not empty; the piece is never empty.
//
// Each splitter does by hand what the encoding's pattern does in a
// backtracking regular-expression engine, alternative by alternative and in
// the same order, with the pattern's character classes as tiktoken's engine
// reads them: \s is unicode.IsSpace and \p{…} are Go's Unicode tables.
type splitter func(text string) int

// class is what the split patterns ask of a rune, one bit a question.
type class uint8

const (
	// space is \s.
	space class = 1 << iota
	// newline is \r or \n.
	newline
	// letter is \p{L}.
	letter
	// number is \p{N}.
	number
	// upper is o200k_base's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
	upper
	// lower is o200k_base's [\p{Ll}\p{Lm}\p{Lo}\p{M}].
	lower
)

// asciiClasses holds the class of each ASCII rune.
var asciiClasses = func() (classes [utf8.RuneSelf]class) {
	for r := range rune(utf8.RuneSelf) {
		classes[r] = classify(r)
	}
	return classes
}()

// classOf returns the class of r.
func classOf(r rune) class {
	if r < utf8.RuneSelf {
		return asciiClasses[r]
	}
	return classify(r)
}

// classify works out the class of r from the Unicode tables.
func classify(r rune) class {
	var c class
	if unicode.IsSpace(r) {
		c |= space
	}
	if r == '\r' || r == '\n' {
		c |= newline
	}
	switch {
	case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
		c |= letter | upper | lower
	case unicode.Is(unicode.Ll, r):
		c |= letter | lower
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		c |= letter | upper
	case unicode.Is(unicode.M, r):
		c |= upper | lower
	case unicode.Is(unicode.N, r):
		c |= number
	}
	return c
}

// classAt returns the class and size of the rune at i, which is before the
// end of text.
func classAt(text string, i int) (class, int) {
	if b := text[i]; b < utf8.RuneSelf {
		return asciiClasses[b], 1
	}
	r, size := utf8.DecodeRuneInString(text[i:])
	return classify(r), size
}

// isOther reports whether c is [^\s\p{L}\p{N}].
func isOther(c class) bool {
	return c&(space|letter|number) == 0
}

// isPrefix reports whether c is [^\r\n\p{L}\p{N}].
func isPrefix(c class) bool {
	return c&(newline|letter|number) == 0
}

// spanAny returns the end of the run of runes from i whose class has a bit
// of mask. ASCII bytes, most of a text, take no call of classAt.
func spanAny(text string, i int, mask class) int {
	for i < len(text) {
		if b := text[i]; b < utf8.RuneSelf {
			if asciiClasses[b]&mask == 0 {
				break
			}
			i++
			continue
		}
		c, size := classAt(text, i)
		if c&mask == 0 {
			break
		}
		i += size
	}
	return i
}

// spanOther returns the end of the run of [^\s\p{L}\p{N}] from i. ASCII
// bytes take no call of classAt.
func spanOther(text string, i int) int {
	for i < len(text) {
		if b := text[i]; b < utf8.RuneSelf {
			if !isOther(asciiClasses[b]) {
				break
			}
			i++
			continue
		}
		c, size := classAt(text, i)
		if !isOther(c) {
			break
		}
		i += size
	}
	return i
}

// spanNumbers returns the end of \p{N}{1,3} from i, or i when there is no
// number there.
func spanNumbers(text string, i int) int {
	for range 3 {
		if i == len(text) {
			break
		}
		c, size := classAt(text, i)
		if c&number == 0 {
			break
		}
		i += size
	}
	return i
}

// spanBytes returns the end of the run of bytes from i that are in set,
// which holds ASCII bytes only.
func spanBytes(text string, i int, set string) int {
	for i < len(text) && indexByte(set, text[i]) {
		i++
	}
	return i
}

// indexByte reports whether set holds b.
func indexByte(set string, b byte) bool {
	for j := range len(set) {
		if set[j] == b {
			return true
		}
	}
	return false
}

// contraction returns the length of 's|'t|'re|'ve|'m|'ll|'d at the start of
// text, or 0. With fold it matches as (?i:…) does: each rune of text is
// lowered first.
func contraction(text string, fold bool) int {
	if len(text) < 2 || text[0] != '\'' {
		return 0
	}
	r1, n1 := decodeLower(text[1:], fold)
	switch r1 {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v', 'l':
		want := 'e'
		if r1 == 'l' {
			want = 'l'
		}
		if r2, n2 := decodeLower(text[1+n1:], fold); r2 == want {
			return 1 + n1 + n2
		}
	}
	return 0
}

// decodeLower decodes the first rune of text, lowered with fold.
func decodeLower(text string, fold bool) (rune, int) {
	r, size := utf8.DecodeRuneInString(text)
	if fold {
		r = unicode.ToLower(r)
	}
	return r, size
}

// spaces matches \s+(?!\S)|\s+ at the start of text, which starts with \s:
// the run of whitespace, less its last rune when text goes on after it, so
// that rune joins the next piece.
func spaces(text string) int {
	end := spanAny(text, 0, space)
	if end == len(text) {
		return end
	}
	_, size := utf8.DecodeLastRuneInString(text[:end])
	if end-size > 0 {
		return end - size
	}
	return end
}

// spacesToNewline matches \s*[\r\n]+|\s+(?!\S)|\s+ at the start of text,
// which starts with \s: the run of whitespace up to its last \r or \n, else
// as spaces does.
func spacesToNewline(text string) int {
	end := spanAny(text, 0, space)
	for i := end - 1; i >= 0; i-- {
		if text[i] == '\r' || text[i] == '\n' {
			return i + 1
		}
	}
	return spaces(text)
}

// splitGPT2 is the split of r50k_base, p50k_base and p50k_edit:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(text string) int {
	if n := contraction(text, false); n > 0 {
		return n
	}
	i := 0
	if text[0] == ' ' && len(text) > 1 {
		i = 1
	}
	c, _ := classAt(text, i)
	switch {
	case c&letter != 0:
		return spanAny(text, i, letter)
	case c&number != 0:
		return spanAny(text, i, number)
	case isOther(c):
		return spanOther(text, i)
	}
	return spaces(text)
}

// splitCL100K is the split of cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100K(text string) int {
	if n := contraction(text, true); n > 0 {
		return n
	}
	c0, size := classAt(text, 0)
	if isPrefix(c0) && size < len(text) {
		if c1, _ := classAt(text, size); c1&letter != 0 {
			return spanAny(text, size, letter)
		}
	}
	if c0&letter != 0 {
		return spanAny(text, 0, letter)
	}
	if c0&number != 0 {
		return spanNumbers(text, 0)
	}
	if end := spanPunctuation(text); end > 0 {
		return spanBytes(text, end, "\r\n")
	}
	return spacesToNewline(text)
}

// splitO200K is the split of o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200K(text string) int {
	c0, size := classAt(text, 0)
	prefix := 0
	if isPrefix(c0) {
		prefix = size
	}
	if end, ok := afterPrefix(text, prefix, casedWord); ok {
		return end + contraction(text[end:], true)
	}
	if end, ok := afterPrefix(text, prefix, capitalWord); ok {
		return end + contraction(text[end:], true)
	}
	if c0&number != 0 {
		return spanNumbers(text, 0)
	}
	if end := spanPunctuation(text); end > 0 {
		return spanBytes(text, end, "\r\n/")
	}
	return spacesToNewline(text)
}

// afterPrefix matches [^\r\n\p{L}\p{N}]?, which ends at prefix (0 when
// text does not start with one), followed by word: taken first, then left
// out.
func afterPrefix(text string, prefix int, word func(text string, start int) (int, bool)) (int, bool) {
	if prefix > 0 {
		if end, ok := word(text, prefix); ok {
			return end, true
		}
	}
	return word(text, 0)
}

// casedWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// from start. When no lower rune follows the run of upper ones, the run gives
// back runes until it ends just after one that is also lower.
func casedWord(text string, start int) (int, bool) {
	mid := spanAny(text, start, upper)
	if end := spanAny(text, mid, lower); end > mid {
		return end, true
	}
	for end := mid; end > start; {
		r, size := utf8.DecodeLastRuneInString(text[start:end])
		if classOf(r)&lower != 0 {
			return end, true
		}
		end -= size
	}
	return 0, false
}

// capitalWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// from start.
func capitalWord(text string, start int) (int, bool) {
	mid := spanAny(text, start, upper)
	if mid == start {
		return 0, false
	}
	return spanAny(text, mid, lower), true
}

// spanPunctuation matches ` ?[^\s\p{L}\p{N}]+` at the start of text and
// returns its end, or 0.
func spanPunctuation(text string) int {
	if text[0] == ' ' {
		if end := spanOther(text, 1); end > 1 {
			return end
		}
	}
	return spanOther(text, 0)
}
