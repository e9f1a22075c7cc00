package ramp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// sizeOf is a page's prompt, by the provider's count, and its max_tokens.
func sizeOf(t *testing.T, body []byte) (prompt, maxTokens int64) {
	t.Helper()
	var req struct {
		MaxTokens int64 `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return openai.TokensOf(req.Messages[0].Content), req.MaxTokens
}

// TestPagesHaveTheProvidersSizesInEveryText checks that every page's prompt is its size by the
// provider's count, four bytes a token, whatever it is written in, and that spread sizes stay
// within their spread, with a mean near the size asked for.
func TestPagesHaveTheProvidersSizesInEveryText(t *testing.T) {
	for _, text := range []string{TextFiller, TextDense, TextSparse, TextCode} {
		for _, spread := range []float64{0, 0.8} {
			o := DefaultOptions()
			o.Pages, o.PromptTokens, o.MaxTokens, o.Text, o.SizeSpread = 50, 805, 50, text, spread
			bodies := newCrowdBodies(o)
			var sum float64
			for i := range o.Pages {
				prompt, maxTokens := sizeOf(t, bodies.of(0, i))
				scale := float64(prompt) / float64(o.PromptTokens)
				if scale < 1-spread-0.01 || scale > 1+spread+0.01 {
					t.Errorf("%s, spread %.1f: page %d has %d prompt tokens, %.2f of the size", text, spread, i, prompt, scale)
				}
				if most := float64(o.MaxTokens) * (1 + spread); float64(maxTokens) > most+1 {
					t.Errorf("%s, spread %.1f: page %d has max_tokens %d, more than %.0f", text, spread, i, maxTokens, most)
				}
				sum += scale
			}
			if mean := sum / float64(o.Pages); mean < 0.95 || mean > 1.05 {
				t.Errorf("%s, spread %.1f: the pages' mean size is %.2f of the size asked for", text, spread, mean)
			}
		}
	}
}

// TestACrowdMixesPageSizes checks which pages of a crowd are short, long and huge: every other
// user's pages long, and the huge pages one in the middle of each part of the crowd's pages.
func TestACrowdMixesPageSizes(t *testing.T) {
	o := DefaultOptions()
	o.Users, o.Pages, o.Text = []int{2, 4}, 5, TextCode
	o.PromptTokens, o.MaxTokens = 600, 200
	o.LongPromptTokens, o.LongMaxTokens = 6000, 300
	o.HugePages, o.HugePromptTokens = 2, 250_000
	bodies := newCrowdBodies(o)
	type size struct{ Prompt, MaxTokens int64 }
	short, long, huge := size{600, 200}, size{6000, 300}, size{250_000, 200}
	want := [][]size{ // the crowd's 20 pages: huge are numbers 5 and 15, user 1's page 0 and user 3's
		{short, short, short, short, short},
		{huge, long, long, long, long},
		{short, short, short, short, short},
		{huge, long, long, long, long},
	}
	got := make([][]size, len(want))
	for u := range got {
		for i := range o.Pages {
			prompt, maxTokens := sizeOf(t, bodies.of(u, i))
			got[u] = append(got[u], size{prompt, maxTokens})
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("the crowd's page sizes (-got +want):\n%s", diff)
	}
	if prompt, _ := sizeOf(t, bodies.of(1, 5)); prompt != 6000 {
		t.Errorf("user 1's call past its book has a prompt of %d; want a long page's, taken round the book", prompt)
	}
}

func TestIsLongUser(t *testing.T) {
	tests := []struct {
		share float64
		want  []int // of users 0 to 7
	}{
		{share: 0.5, want: []int{1, 3, 5, 7}},
		{share: 0.25, want: []int{3, 7}},
		{share: 0.75, want: []int{1, 2, 3, 5, 6, 7}},
		{share: 1, want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{share: 0},
	}
	for _, tc := range tests {
		var got []int
		for u := range 8 {
			if isLongUser(u, tc.share) {
				got = append(got, u)
			}
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("long users at %.2f (-got +want):\n%s", tc.share, diff)
		}
	}
}

func TestHugePagesAreSpreadEvenly(t *testing.T) {
	tests := []struct {
		n, total int
		want     map[int]bool
	}{
		{n: 4, total: 800, want: map[int]bool{100: true, 300: true, 500: true, 700: true}},
		{n: 3, total: 10, want: map[int]bool{1: true, 5: true, 8: true}},
		{n: 3, total: 3, want: map[int]bool{0: true, 1: true, 2: true}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(hugePages(tc.n, tc.total), tc.want); diff != "" {
			t.Errorf("hugePages(%d, %d) (-got +want):\n%s", tc.n, tc.total, diff)
		}
	}
}

func TestAnUnknownTextIsRefused(t *testing.T) {
	o := DefaultOptions()
	o.Text = "klingon"
	if err := o.validate(); err == nil {
		t.Error("validate accepted an unknown text")
	}
}
