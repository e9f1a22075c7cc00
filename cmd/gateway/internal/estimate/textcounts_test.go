package estimate

import (
	"hash/maphash"
	"slices"
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
	k, slot := c.texts.key(e, len(text), maphash.String(c.texts.seed, text))
	kept := slot.Load()
	return kept != nil && kept.names(k)
}

// TestCountBytesAsCount counts texts read in place from a body as their strings count, and
// finds the count kept of a long one, counted before as a string, by its bytes.
func TestCountBytesAsCount(t *testing.T) {
	long := strings.Repeat("The gateway settles what the call really cost. ", 100)
	for _, text := range []string{"Say hello.", "café 中文 😀", long} {
		for _, enc := range []string{"o200k_base", "cl100k_base", ""} {
			want := uncachedCounter.Count(enc, text)
			if got := NewCounter().countBytes(enc, []byte(text)); got != want {
				t.Errorf("%q under %q: %d tokens as bytes, %d as a string", text[:min(len(text), 16)], enc, got, want)
			}
		}
	}
	c := NewCounter()
	c.Count("o200k_base", long)
	before := keptCounts(c)
	c.countBytes("o200k_base", []byte(long))
	if !slices.Equal(keptCounts(c), before) {
		t.Errorf("a long text counted as a string is counted again as bytes; want its count kept found")
	}
}

// keptCounts are the counts c keeps, slot by slot.
func keptCounts(c *Counter) []*textCount {
	kept := make([]*textCount, len(c.texts.slots))
	for i := range c.texts.slots {
		kept[i] = c.texts.slots[i].Load()
	}
	return kept
}
