package openai

import "strings"

// BytesPerToken is the proxy's size of a token: its text, in UTF-8 bytes.
const BytesPerToken = 4

// TokensOf counts text with the proxy: ceil(UTF-8 bytes / 4).
func TokensOf(text string) int64 { return TokensOfBytes(len(text)) }

// TokensOfBytes is the proxy's count for n bytes of UTF-8 text.
func TokensOfBytes(n int) int64 { return int64((n + BytesPerToken - 1) / BytesPerToken) }

// fillerWords are the words of filler text, each one token of four bytes
// with its space.
var fillerWords = [...]string{"the ", "lab ", "has ", "one ", "big ", "red ", "cat ", "and "}

// Filler is the deterministic text of an answer of n tokens: n words of
// four bytes, so TokensOf(Filler(n)) == n.
func Filler(n int64) string {
	var b strings.Builder
	b.Grow(int(n) * BytesPerToken)
	for i := range n {
		b.WriteString(fillerWords[i%int64(len(fillerWords))])
	}
	return b.String()
}
