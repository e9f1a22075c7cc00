package estimate

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"testing"
)

// pngDataURL is a data URL of a blank PNG of w×h pixels.
func pngDataURL(t *testing.T, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestImageTokens checks each family's formula against the examples of OpenAI's vision guide,
// and that an image of unknown size counts the largest the formula allows.
func TestImageTokens(t *testing.T) {
	tests := []struct {
		name   string
		model  string
		w, h   int // 0: sent by URL
		detail string
		want   int64
	}{
		{"gpt-4o 1024×1024 high", "gpt-4o", 1024, 1024, "high", 85 + 4*170},
		{"gpt-4o 2048×4096 high", "gpt-4o-2024-08-06", 2048, 4096, "high", 85 + 6*170},
		{"gpt-4o small image is one tile", "gpt-4o", 500, 500, "auto", 85 + 170},
		{"gpt-4o low detail", "gpt-4o", 4096, 8192, "low", 85},
		{"gpt-4o by URL counts the largest", "gpt-4o", 0, 0, "", 85 + 8*170},
		{"gpt-4o-mini is its own family", "gpt-4o-mini", 1024, 1024, "high", 2833 + 4*5667},
		{"o1 tiles", "o1", 1024, 1024, "high", 75 + 4*150},
		{"gpt-4.1-mini patches", "gpt-4.1-mini", 1024, 1024, "high", 1659},    // 1024 patches × 1.62
		{"gpt-4.1-mini patches cap", "gpt-4.1-mini", 1800, 2400, "low", 2489}, // 1536 × 1.62
		{"o4-mini by URL", "o4-mini", 0, 0, "", 2642},                         // 1536 × 1.72
		{"another family counts as gpt-4o", "llama-3.2-vision", 1024, 1024, "", 85 + 4*170},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := "https://example.com/a.png"
			if tc.w > 0 {
				url = pngDataURL(t, tc.w, tc.h)
			}
			raw := fmt.Appendf(nil, `{"url":%q,"detail":%q}`, url, tc.detail)
			if got, err := imageTokens(imageFormulaOf(tc.model), raw); err != nil || got != tc.want {
				t.Errorf("imageTokens(%s, %d×%d, %q) = %d, want %d", tc.model, tc.w, tc.h, tc.detail, got, tc.want)
			}
		})
	}
}

// TestImageTokensOfUnreadableDataURLs checks that a data URL whose size cannot be read counts
// as the largest image.
func TestImageTokensOfUnreadableDataURLs(t *testing.T) {
	for _, url := range []string{"data:image/png;base64,!!!!", "data:image/webp;base64,UklGRg==", "data:,plain"} {
		if got, err := imageTokens(gpt4oImages, fmt.Appendf(nil, `{"url":%q}`, url)); err != nil || got != 85+8*170 {
			t.Errorf("imageTokens(%q) = %d, want %d", url, got, 85+8*170)
		}
	}
}
