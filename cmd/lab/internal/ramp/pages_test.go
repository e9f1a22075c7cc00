package ramp

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// TestPagesHaveTheProvidersSizesInEveryText checks that every page's prompt is its size by the
// provider's count, four bytes a token, whatever it is written in, and that spread sizes stay
// within their spread, with a mean near the size asked for.
func TestPagesHaveTheProvidersSizesInEveryText(t *testing.T) {
	for _, text := range []string{TextFiller, TextDense, TextSparse} {
		for _, spread := range []float64{0, 0.8} {
			o := DefaultOptions()
			o.Pages, o.PromptTokens, o.MaxTokens, o.Text, o.SizeSpread = 50, 805, 50, text, spread
			var sum float64
			for i, body := range pageBodies(o) {
				var req struct {
					MaxTokens int64 `json:"max_tokens"`
					Messages  []struct {
						Content string `json:"content"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(body, &req); err != nil {
					t.Fatal(err)
				}
				prompt := openai.TokensOf(req.Messages[0].Content)
				scale := float64(prompt) / float64(o.PromptTokens)
				if scale < 1-spread-0.01 || scale > 1+spread+0.01 {
					t.Errorf("%s, spread %.1f: page %d has %d prompt tokens, %.2f of the size", text, spread, i, prompt, scale)
				}
				if max := float64(o.MaxTokens) * (1 + spread); float64(req.MaxTokens) > max+1 {
					t.Errorf("%s, spread %.1f: page %d has max_tokens %d, more than %.0f", text, spread, i, req.MaxTokens, max)
				}
				sum += scale
			}
			if mean := sum / float64(o.Pages); mean < 0.95 || mean > 1.05 {
				t.Errorf("%s, spread %.1f: the pages' mean size is %.2f of the size asked for", text, spread, mean)
			}
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
