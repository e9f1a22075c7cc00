package estimate

import (
	"strings"
	"testing"
)

// TestCountKeptTexts counts long texts twice, and texts that differ from one of them by a byte
// or by their encoding: each count is the one the text has uncounted before.
func TestCountKeptTexts(t *testing.T) {
	c := NewCounter()
	long := strings.Repeat("The gateway settles what the call really cost. ", 100)
	texts := []string{long, long[:len(long)-1] + "!", "Z" + long[1:], strings.Repeat("1234 ", minCachedText/5+1)}
	for _, enc := range []string{"o200k_base", "cl100k_base", "r50k_base"} {
		for i, text := range texts {
			want := uncachedCounter.Count(enc, text)
			for round := range 2 {
				if got := c.Count(enc, text); got != want {
					t.Errorf("%s, text %d, count %d: %d tokens, want %d", enc, i, round+1, got, want)
				}
				if !isKept(c, enc, text) {
					t.Errorf("%s, text %d, count %d: the count is not kept", enc, i, round+1)
				}
			}
		}
	}
}

// TestCountKeepsNoShortText counts a text shorter than minCachedText: its count is not kept.
func TestCountKeepsNoShortText(t *testing.T) {
	c := NewCounter()
	text := strings.Repeat("a ", minCachedText/2-1)
	c.Count("o200k_base", text)
	if isKept(c, "o200k_base", text) {
		t.Errorf("the count of %d bytes is kept; want it counted each time", len(text))
	}
}

// isKept reports whether c keeps the count of text under encoding.
func isKept(c *Counter, encoding, text string) bool {
	e := c.encoder(encoding)
	k, slot := c.texts.key(e, text)
	kept := slot.Load()
	return kept != nil && kept.names(k)
}
