package estimate

import (
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
)

// rankTable holds an encoding's tokens and their ranks in a hash table whose slots hold no
// pointers. The garbage collector scans a map of strings entry by entry, and the largest
// encoding has 200,000 of them, at every cycle of a process that allocates per request; this
// table it skips whole.
type rankTable struct {
	seed   maphash.Seed
	mix    [2]uint64 // the seed of hash's short strings
	bytes  string    // every token's bytes, one token after another
	slots  []slot    // open addressing with linear probing: a power of two, at most half full
	short  []uint32  // the rank of each string of one or two bytes, or noToken; see shortIndex
	maxLen int       // the length of the longest token
}

// noToken is the rank, in 32 bits, of a string that is no token.
const noToken = math.MaxUint32

// slot is one token: where its bytes are in rankTable.bytes, and its rank. A slot of length zero
// is empty.
type slot struct {
	start, length, rank uint32
}

// newRankTable returns the table of ranks, or false if a token is empty or a rank is out of
// range (below 0, or not below math.MaxUint32): not a tiktoken encoding.
func newRankTable(ranks map[string]int) (*rankTable, bool) {
	size := 1
	for size < 2*len(ranks) {
		size *= 2
	}
	t := &rankTable{seed: maphash.MakeSeed(), slots: make([]slot, size), short: make([]uint32, 256+1<<16)}
	t.mix = [2]uint64{rand.Uint64() | 1, rand.Uint64() | 1}
	for i := range t.short {
		t.short[i] = noToken
	}
	var bytes []byte
	for token, rank := range ranks {
		if token == "" || rank < 0 || int64(rank) >= math.MaxUint32 || int64(len(bytes)+len(token)) > math.MaxUint32 {
			return nil, false
		}
		i := t.home(token)
		for t.slots[i].length != 0 {
			i = (i + 1) & uint64(size-1)
		}
		t.slots[i] = slot{start: uint32(len(bytes)), length: uint32(len(token)), rank: uint32(rank)}
		bytes = append(bytes, token...)
		t.maxLen = max(t.maxLen, len(token))
		if len(token) <= 2 {
			t.short[shortIndex(token)] = uint32(rank)
		}
	}
	t.bytes = string(bytes)
	return t, true
}

// home is the slot where the search for token starts.
func (t *rankTable) home(token string) uint64 {
	return t.hash(token) & uint64(len(t.slots)-1)
}

// hash hashes token, which is not empty. Most pieces of a text are a word of up to sixteen
// bytes, which it hashes from two loads of its bytes, one multiplication and the table's seed
// (wyhash's mixing, as Go's own maps hash) rather than by maphash, whose call costs more than
// the mixing for a string that short. Longer tokens are hashed by maphash.
func (t *rankTable) hash(token string) uint64 {
	n := len(token)
	var a, b uint64
	switch {
	case n > 16:
		return maphash.String(t.seed, token)
	case n > 8:
		a, b = load64(token), load64(token[n-8:])
	case n >= 4:
		a, b = load32(token), load32(token[n-4:])
	default:
		a = uint64(token[0]) | uint64(token[n/2])<<8 | uint64(token[n-1])<<16
	}
	hi, lo := bits.Mul64(a^t.mix[0], b^t.mix[1]^uint64(n))
	return hi ^ lo
}

// shortIndex is where rankTable.short holds the rank of token, of one or two
// bytes.
func shortIndex(token string) int {
	if len(token) == 1 {
		return int(token[0])
	}
	return 256 + int(token[0])<<8 + int(token[1])
}

// rank returns the rank of token, and whether it is a token at all.
func (t *rankTable) rank(token string) (int, bool) {
	switch {
	case len(token) == 0 || len(token) > t.maxLen:
		return 0, false
	case len(token) <= 2:
		rank := t.short[shortIndex(token)]
		return int(rank), rank != noToken
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(token); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.length == 0 {
			return 0, false
		}
		if int(s.length) == len(token) && t.bytes[s.start:s.start+s.length] == token {
			return int(s.rank), true
		}
	}
}

// load64 is the first eight bytes of s, little-endian.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 is the first four bytes of s, little-endian.
func load32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
