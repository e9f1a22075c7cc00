package estimate

import (
	"slices"
	"testing"
)

// TestMergerMatchesScan checks that a merger finds the tokens that scanParts,
// tiktoken's own loop, finds, in every prefix of texts of each kind.
func TestMergerMatchesScan(t *testing.T) {
	texts := slices.Clone(corpus)
	for _, tc := range sizedTexts(300) {
		texts = append(texts, tc.text)
	}
	for _, enc := range []string{"cl100k_base", "o200k_base"} {
		t.Run(enc, func(t *testing.T) {
			ranks := counter.encoder(enc).ranks
			for _, text := range texts {
				for n := 1; n <= min(len(text), 300); n++ {
					checkMergerMatchesScan(t, ranks, text[:n])
				}
			}
		})
	}
}

func FuzzMergerMatchesScan(f *testing.F) {
	for _, text := range corpus {
		f.Add(text)
	}
	ranks := counter.encoder("o200k_base").ranks
	f.Fuzz(func(t *testing.T, piece string) {
		if len(piece) > 4*maxSegment {
			t.Skip("longer than a merge needs to be")
		}
		checkMergerMatchesScan(t, ranks, piece)
	})
}

// checkMergerMatchesScan fails unless a merger merges piece into the tokens
// that scanParts does, and counts them.
func checkMergerMatchesScan(t *testing.T, ranks *rankTable, piece string) {
	t.Helper()
	var m merger
	count := m.merge(piece, ranks)
	got := m.appendStarts(nil)
	want := scanParts(piece, ranks, nil)
	if !slices.EqualFunc(got, want, func(a, b part) bool { return a.start == b.start }) {
		t.Fatalf("merger splits %q at %v, scanParts at %v", piece, got, want)
	}
	if count != len(want)-1 {
		t.Fatalf("merger counts %d tokens in %q, want %d", count, piece, len(want)-1)
	}
}
