package estimate

import (
	"math"
	"sync"
)

// part is one part of a piece during the byte-pair merge: where it starts,
// and the rank of the token it forms with the part after it.
type part struct {
	start int
	rank  int
}

// noRank is the rank of two parts that form no token.
const noRank = math.MaxInt

// longPiece is the length in bytes from which a piece is merged by a merger,
// in O(n log n) time, rather than by scanParts, in O(n²).
const longPiece = 32

// countPiece returns the number of tokens in piece, one piece of a split.
func countPiece(piece string, ranks *rankTable) int {
	if _, ok := ranks.rank(piece); ok {
		return 1
	}
	if len(piece) < longPiece {
		var scratch [longPiece]part
		return len(scanParts(piece, ranks, scratch[:0])) - 1
	}
	m := mergers.Get().(*merger)
	defer mergers.Put(m)
	return m.merge(piece, ranks)
}

// mergeParts runs the byte-pair merge on piece, as tiktoken does: starting
// from single bytes, it merges the two neighbours that form the token of
// lowest rank, the leftmost of equals, until no two form a token. It returns
// the start of each token followed by the end of piece, in parts' storage.
func mergeParts(piece string, ranks *rankTable, parts []part) []part {
	if len(piece) < longPiece {
		return scanParts(piece, ranks, parts)
	}
	m := mergers.Get().(*merger)
	defer mergers.Put(m)
	m.merge(piece, ranks)
	return m.appendStarts(parts[:0])
}

// scanParts is mergeParts by scanning every pair for the lowest rank at each
// merge: the fastest way for short pieces.
func scanParts(piece string, ranks *rankTable, parts []part) []part {
	parts = parts[:0]
	for i := range len(piece) + 1 {
		parts = append(parts, part{start: i, rank: noRank})
	}
	for i := range parts {
		parts[i].rank = pairRank(piece, ranks, parts, i)
	}
	for {
		best := -1
		for i, p := range parts {
			if p.rank != noRank && (best < 0 || p.rank < parts[best].rank) {
				best = i
			}
		}
		if best < 0 {
			return parts
		}
		parts = append(parts[:best+1], parts[best+2:]...)
		parts[best].rank = pairRank(piece, ranks, parts, best)
		if best > 0 {
			parts[best-1].rank = pairRank(piece, ranks, parts, best-1)
		}
	}
}

// pairRank returns the rank of the token that parts i and i+1 form, or
// noRank.
func pairRank(piece string, ranks *rankTable, parts []part, i int) int {
	if i+2 >= len(parts) {
		return noRank
	}
	if rank, ok := ranks.rank(piece[parts[i].start:parts[i+2].start]); ok {
		return rank
	}
	return noRank
}

// mergers holds merger values for reuse, so that merging a long piece
// allocates nothing.
var mergers = sync.Pool{New: func() any { return new(merger) }}

// A merger runs the byte-pair merge of mergeParts in O(n log n) time for a
// piece of n bytes: its parts are a linked list, and a heap holds each pair
// of neighbours ordered by rank and then start, so it gives the pair that
// mergeParts would merge next. A pair that a merge has changed stays in the
// heap and is passed over when it comes up.
//
// The zero merger is ready to use. A merger is not safe for concurrent use.
type merger struct {
	links []link   // the part that starts at each byte, and the end of the piece
	pairs pairHeap // pairs of neighbours, some passed over
}

// link is one part of a piece in a merger: the starts of the parts before and
// after it, and the rank of the token it forms with the part after it, or
// noToken.
type link struct {
	prev, next int32
	rank       uint32
}

// merge runs the merge on piece, shorter than 2 GiB, and returns its number
// of tokens.
func (m *merger) merge(piece string, ranks *rankTable) int {
	m.reset(piece, ranks)
	tokens := len(piece)
	for len(m.pairs) > 0 {
		rank, i := m.pairs.pop()
		if m.links[i].rank == rank {
			m.join(piece, ranks, i)
			tokens--
		}
	}
	return tokens
}

// reset makes each byte of piece a part and ranks the pairs.
func (m *merger) reset(piece string, ranks *rankTable) {
	m.links = m.links[:0]
	m.pairs = m.pairs[:0]
	for i := range len(piece) + 1 {
		m.links = append(m.links, link{prev: int32(i - 1), next: int32(i + 1), rank: noToken})
	}
	for i := 0; i+2 <= len(piece); i++ {
		if rank, ok := ranks.rank(piece[i : i+2]); ok {
			m.links[i].rank = uint32(rank)
			m.pairs = append(m.pairs, pairKey(uint32(rank), int32(i)))
		}
	}
	m.pairs.init()
}

// join merges the part that starts at i with the next one, and ranks the two
// pairs that changed.
func (m *merger) join(piece string, ranks *rankTable, i int32) {
	next := m.links[i].next
	after := m.links[next].next
	m.links[i].next = after
	m.links[after].prev = i
	m.links[next].rank = noToken
	m.rerank(piece, ranks, i)
	if prev := m.links[i].prev; prev >= 0 {
		m.rerank(piece, ranks, prev)
	}
}

// rerank sets the rank of the pair that starts at i, and puts it in the heap
// if it forms a token.
func (m *merger) rerank(piece string, ranks *rankTable, i int32) {
	m.links[i].rank = noToken
	next := m.links[i].next
	if int(next) == len(piece) {
		return
	}
	if rank, ok := ranks.rank(piece[i:m.links[next].next]); ok {
		m.links[i].rank = uint32(rank)
		m.pairs.push(pairKey(uint32(rank), i))
	}
}

// appendStarts appends the start of each token of the last merge, and then
// the end of the piece, to parts.
func (m *merger) appendStarts(parts []part) []part {
	end := int32(len(m.links) - 1)
	for i := int32(0); i < end; i = m.links[i].next {
		parts = append(parts, part{start: int(i), rank: noRank})
	}
	return append(parts, part{start: int(end), rank: noRank})
}

// pairHeap is a binary min-heap of pairKey values.
type pairHeap []uint64

// pairKey orders pairs by rank and then by start, as mergeParts picks them.
func pairKey(rank uint32, start int32) uint64 {
	return uint64(rank)<<32 | uint64(start)
}

// push adds key to h.
func (h *pairHeap) push(key uint64) {
	*h = append(*h, key)
	h.up(len(*h)-1, key)
}

// up puts key at i, a free place in h, or above it where it belongs.
func (h pairHeap) up(i int, key uint64) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent] <= key {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = key
}

// pop removes the least key from h, which is not empty, and returns its rank
// and start. The hole it leaves sinks to a leaf, where the last key fills it.
func (h *pairHeap) pop() (uint32, int32) {
	s := *h
	key := s[0]
	last := len(s) - 1
	i := 0
	for {
		child := 2*i + 1
		if child >= last {
			break
		}
		if child+1 < last && s[child+1] < s[child] {
			child++
		}
		s[i] = s[child]
		i = child
	}
	s.up(i, s[last])
	*h = s[:last]
	return uint32(key >> 32), int32(uint32(key))
}

// init orders h as a heap.
func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves the key at i down to its place in h.
func (h pairHeap) down(i int) {
	key := h[i]
	for {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if right := child + 1; right < len(h) && h[right] < h[child] {
			child = right
		}
		if key <= h[child] {
			break
		}
		h[i] = h[child]
		i = child
	}
	h[i] = key
}
