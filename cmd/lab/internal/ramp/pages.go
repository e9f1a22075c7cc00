package ramp

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// The texts a page's prompt may be written in (Options.Text). The provider counts each at four
// bytes a token; a gateway's encoding (o200k_base, cl100k_base) counts them differently.
const (
	// TextFiller is words of four bytes, one token each by both counts: the two agree.
	TextFiller = "filler"
	// TextDense is " word" over and over: five bytes a token by the encoding, four fifths of
	// the provider's count.
	TextDense = "dense"
	// TextSparse is " q8z" over and over: three tokens to four bytes by the encoding, three times
	// the provider's count.
	TextSparse = "sparse"
)

var texts = map[string]string{TextFiller: "", TextDense: " word", TextSparse: " q8z"}

// goldenRatio spreads the pages' sizes evenly over their range, in no order a page's index tells.
const goldenRatio = 1.618033988749895

// pageBodies are the requests of a book's pages, one by index: a chat of PromptTokens and
// MaxTokens, each scaled by a factor between 1-SizeSpread and 1+SizeSpread (the same for both,
// its mean 1), its prompt in Text.
func pageBodies(o Options) [][]byte {
	bodies := make([][]byte, o.Pages)
	for i := range bodies {
		scale := 1.0
		if o.SizeSpread > 0 {
			_, frac := math.Modf(float64(i) * goldenRatio)
			scale = 1 - o.SizeSpread + 2*o.SizeSpread*frac
		}
		prompt := max(int64(math.Round(float64(o.PromptTokens)*scale)), 1)
		maxTokens := max(int64(math.Round(float64(o.MaxTokens)*scale)), 1)
		bodies[i] = openai.ChatBody(o.Provider.Models[0], maxTokens, promptText(o.Text, prompt))
	}
	return bodies
}

// promptText is text of tokens by the provider's count, four bytes a token, written in text.
func promptText(text string, tokens int64) string {
	word := texts[text]
	if word == "" {
		return openai.Filler(tokens)
	}
	bytes := int(tokens) * 4
	body := strings.Repeat(word, bytes/len(word))
	return body + strings.Repeat(".", bytes-len(body))
}

// validateText reports a Text that is none of the texts.
func validateText(text string) error {
	if _, ok := texts[text]; !ok {
		return fmt.Errorf("ramp: options: unknown text %q: must be %s, %s or %s", text, TextFiller, TextDense, TextSparse)
	}
	return nil
}
