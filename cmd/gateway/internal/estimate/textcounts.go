package estimate

import (
	"hash/maphash"
	"sync/atomic"
)

// Long texts come back: a chat's transcript is sent again, whole, with each turn, and an agent's
// system prompt and tools with each of its calls. A Counter keeps the counts of the last long
// texts it counted, so that a text sent again is hashed rather than counted: hashing takes about
// a hundredth of the time counting does.

// minCachedText is the length in bytes from which a text's count is kept: below it, counting
// takes little more than hashing.
const minCachedText = 1024

// textCountSlots is how many counts a Counter keeps, each in the slot its text's hash names;
// a count replaces the one in its slot. It bounds their memory at a few tens of KiB.
const textCountSlots = 1024

// textCounts keeps the counts of the long texts counted last, each under its encoding, its
// length and a 64-bit hash of its text whose seed is the process's own, which no client knows:
// two texts of a length that one is taken for the other once in 2⁶⁴. It is safe for concurrent
// use.
type textCounts struct {
	seed  maphash.Seed
	slots [textCountSlots]atomic.Pointer[textCount]
}

// textCount is the count of one text under one encoding.
type textCount struct {
	encoder *encoder
	hash    uint64
	length  int
	tokens  int64
}

func newTextCounts() *textCounts {
	return &textCounts{seed: maphash.MakeSeed()}
}

// key is what names a text of length bytes and hash under e, and the slot where its count is
// kept: the same text's counts under two encodings are kept in two slots.
func (t *textCounts) key(e *encoder, length int, hash uint64) (textCount, *atomic.Pointer[textCount]) {
	k := textCount{encoder: e, length: length, hash: hash}
	return k, &t.slots[(k.hash^maphash.Comparable(t.seed, e))%textCountSlots]
}

// count returns the count of a text of length bytes and hash under e, counting it with count
// unless it was kept.
func (t *textCounts) count(e *encoder, length int, hash uint64, count func() int64) int64 {
	k, slot := t.key(e, length, hash)
	if kept := slot.Load(); kept != nil && kept.names(k) {
		return kept.tokens
	}
	counted := &textCount{encoder: k.encoder, hash: k.hash, length: k.length, tokens: count()}
	slot.Store(counted)
	return counted.tokens
}

// names reports whether c is the count of the text k names.
func (c *textCount) names(k textCount) bool {
	return c.encoder == k.encoder && c.hash == k.hash && c.length == k.length
}
