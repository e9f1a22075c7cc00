package estimate

import (
	"math"
	"strings"
	"testing"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// TestRankTableHoldsEveryToken checks that the table answers every token of every encoding with
// its rank, as the loader's map does, and nothing else.
func TestRankTableHoldsEveryToken(t *testing.T) {
	for _, file := range []string{"cl100k_base.tiktoken", "o200k_base.tiktoken", "p50k_base.tiktoken", "r50k_base.tiktoken"} {
		ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(file)
		if err != nil {
			t.Fatal(err)
		}
		table, ok := newRankTable(ranks)
		if !ok {
			t.Fatalf("%s: refused", file)
		}
		for token, want := range ranks {
			if got, ok := table.rank(token); !ok || got != want {
				t.Fatalf("%s: rank(%q) = %d, %t; want %d, true", file, token, got, ok, want)
			}
		}
		for _, notToken := range []string{"", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "antidisestablishmentarianism", strings.Repeat(" ", 129)} {
			if _, known := ranks[notToken]; known {
				t.Fatalf("%s: %q is a token", file, notToken)
			}
			if got, ok := table.rank(notToken); ok {
				t.Errorf("%s: rank(%q) = %d, true; want none", file, notToken, got)
			}
		}
	}
}

func TestRankTableRefusesWhatIsNoEncoding(t *testing.T) {
	for name, ranks := range map[string]map[string]int{
		"empty token":   {"a": 0, "": 1},
		"negative rank": {"a": 0, "b": -1},
		"rank too high": {"a": 0, "b": math.MaxUint32},
	} {
		if _, ok := newRankTable(ranks); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	table, ok := newRankTable(map[string]int{})
	if !ok {
		t.Fatal("no tokens: refused")
	}
	if _, ok := table.rank("a"); ok {
		t.Error("no tokens: rank(\"a\") found")
	}
}
