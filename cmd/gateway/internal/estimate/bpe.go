package estimate

import "math"

// part is one part of a piece during the byte-pair merge: where it starts,
// and the rank of the token it forms with the part after it.
type part struct {
	start int
	rank  int
}

// noRank is the rank of two parts that form no token.
const noRank = math.MaxInt

// countPiece returns the number of tokens in piece, one piece of a split.
func countPiece(piece string, ranks *rankTable) int {
	if _, ok := ranks.rank(piece); ok {
		return 1
	}
	var scratch [64]part
	parts := scratch[:0]
	if len(piece) >= len(scratch) {
		parts = make([]part, 0, len(piece)+1)
	}
	return len(mergeParts(piece, ranks, parts)) - 1
}

// mergeParts runs the byte-pair merge on piece, as tiktoken does: starting
// from single bytes, it merges the two neighbours that form the token of
// lowest rank, the leftmost of equals, until no two form a token. It returns
// the start of each token followed by the end of piece, in parts' storage.
func mergeParts(piece string, ranks *rankTable, parts []part) []part {
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
