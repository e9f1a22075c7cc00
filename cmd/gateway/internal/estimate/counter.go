package estimate

import (
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// maxSegment bounds, in bytes, the text split and counted at once, and so
// the pieces merged. Merging a piece of n bytes takes time in n log n and
// memory in n (see merger), so cutting keeps the count's time linear in the
// text and its memory small.
const maxSegment = 1024

// Counter counts tokens in text with a named byte-pair encoding. Encodings are
// loaded on first use, once each, from data compiled into the binary.
//
// A Counter is safe for concurrent use. The zero Counter and a nil *Counter
// count everything with the proxy; use [NewCounter] for real encodings.
type Counter struct {
	// encoders is filled by NewCounter and never changed after, so it is
	// read without a lock.
	encoders map[string]*encoder
	// texts keeps the counts of long texts; nil keeps none.
	texts *textCounts
}

// encoder is one encoding: how it splits text into pieces, and the ranks of
// its tokens, loaded at most once.
type encoder struct {
	file  string // the encoding's rank file in tiktoken-go-loader
	split splitter
	once  sync.Once
	ranks *rankTable // nil when the encoding failed to load
}

// NewCounter returns a Counter for the encodings the package knows. It loads
// nothing yet: each encoding is loaded when it is first counted with.
func NewCounter() *Counter {
	// p50k_edit differs from p50k_base only in special tokens, which count
	// as plain text here.
	p50k := &encoder{file: "p50k_base.tiktoken", split: splitGPT2}
	return &Counter{encoders: map[string]*encoder{
		"cl100k_base": {file: "cl100k_base.tiktoken", split: splitCL100K},
		"o200k_base":  {file: "o200k_base.tiktoken", split: splitO200K},
		"p50k_base":   p50k,
		"p50k_edit":   p50k,
		"r50k_base":   {file: "r50k_base.tiktoken", split: splitGPT2},
	}, texts: newTextCounts()}
}

// Count returns the number of tokens in text under encoding. An empty or
// unknown encoding, or one that failed to load, counts with the proxy
// ceil(UTF-8 bytes / 4). Special tokens such as <|endoftext|> count as the
// plain text they are in a request.
//
// The count is tiktoken's: text is split into pieces with the encoding's
// pattern and each piece counts the tokens of its byte-pair encoding. Text
// is cut into segments of at most maxSegment bytes first; a cut inside a
// piece may count one token fewer than tiktoken, or a few more (see
// cutPoint). A text of minCachedText bytes or more that was counted lately
// is not counted again: its count was kept (see textCounts).
func (c *Counter) Count(encoding string, text string) int64 {
	return countOf(c, encoding, text, maphash.String)
}

// countBytes is Count of a text read in place from a request's body: a count kept is found by
// hashing the body's own bytes, and only a text counted anew is copied, to be counted.
func (c *Counter) countBytes(encoding string, text []byte) int64 {
	return countOf(c, encoding, text, maphash.Bytes)
}

// countOf is Count of a text held as a string or as bytes, hashed with hash to find its count
// kept.
func countOf[T string | []byte](c *Counter, encoding string, text T, hash func(maphash.Seed, T) uint64) int64 {
	e := c.encoder(encoding)
	switch {
	case e == nil:
		return proxyBytes(len(text))
	case c.texts != nil && len(text) >= minCachedText:
		return c.texts.count(e, len(text), hash(c.texts.seed, text), func() int64 { return e.countText(string(text)) })
	}
	return e.countText(string(text))
}

// countText returns the number of tokens in text (see Counter.Count).
func (e *encoder) countText(text string) int64 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, string(utf8.RuneError))
	}
	var n int64
	for text != "" {
		cut := cutPoint(text)
		n += e.count(text[:cut])
		text = text[cut:]
	}
	return n
}

// encoder returns the loaded encoding, or nil to use the proxy.
func (c *Counter) encoder(encoding string) *encoder {
	if c == nil {
		return nil
	}
	e, ok := c.encoders[encoding]
	if !ok {
		return nil
	}
	e.once.Do(e.load)
	if e.ranks == nil {
		return nil
	}
	return e
}

// load reads the encoding's ranks from the data compiled in; on failure
// ranks stays nil and counting falls back to the proxy.
func (e *encoder) load() {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(e.file)
	if err != nil || len(ranks) == 0 {
		return
	}
	if table, ok := newRankTable(ranks); ok {
		e.ranks = table
	}
}

// count returns the number of tokens in segment, which is valid UTF-8.
func (e *encoder) count(segment string) int64 {
	var n int64
	for segment != "" {
		end := e.split(segment)
		n += int64(countPiece(segment[:end], e.ranks))
		segment = segment[end:]
	}
	return n
}

// proxyBytes is the documented proxy for n bytes of text: ceil(n / 4), a text's UTF-8 bytes
// over four.
func proxyBytes(n int) int64 {
	return (int64(n) + 3) / 4
}

// cutPoint returns where to end the next segment of text. It prefers the
// last space in the second half of the window that follows a printable ASCII
// byte: no piece of the encodings' split patterns spans such a boundary, so
// the count is the same as for the whole text. Failing that it cuts at a rune
// boundary; where that is inside a piece, the halves may count one token
// fewer than the whole, or up to five more (see TestCountCutPieces).
func cutPoint(text string) int {
	if len(text) <= maxSegment {
		return len(text)
	}
	for i := maxSegment; i > maxSegment/2; i-- {
		if text[i] == ' ' && text[i-1] > ' ' && text[i-1] < utf8.RuneSelf {
			return i
		}
	}
	i := maxSegment
	for i > maxSegment-utf8.UTFMax && !utf8.RuneStart(text[i]) {
		i--
	}
	return i
}
