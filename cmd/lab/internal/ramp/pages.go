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
	// TextCode is a Go function over and over, identifiers, punctuation and indentation: about
	// 3.25 bytes a token by the encoding, a quarter more than the provider's count.
	TextCode = "code"
)

// codeSnippet is the function TextCode repeats.
const codeSnippet = "func (s *Store) Put(ctx context.Context, key string, value []byte) error {\n" +
	"\tif err := s.db.Set(ctx, key, value); err != nil {\n" +
	"\t\treturn fmt.Errorf(\"store: put %q: %w\", key, err)\n" +
	"\t}\n\treturn nil\n}\n\n"

var texts = map[string]string{TextFiller: "", TextDense: " word", TextSparse: " q8z", TextCode: codeSnippet}

// goldenRatio spreads the pages' sizes evenly over their range, in no order a page's index tells.
const goldenRatio = 1.618033988749895

// crowdBodies are the requests of the crowd's pages, by user and index: a long user's pages are
// long, a few pages spread over the crowd are huge, and the others are short. It is safe for
// concurrent use: nothing changes it once built.
type crowdBodies struct {
	pages     int     // a book's pages
	longShare float64 // the share of users whose pages are long; 0 for none
	huge      map[int]bool
	// short and long are a book's pages of each size, by index.
	short, long [][]byte
	hugeBody    []byte
}

// newCrowdBodies are the requests of the crowd o describes.
func newCrowdBodies(o Options) crowdBodies {
	c := crowdBodies{pages: o.Pages, short: bookBodies(o, o.PromptTokens, o.MaxTokens)}
	if o.LongPromptTokens > 0 {
		c.longShare = o.LongUsers
		c.long = bookBodies(o, o.LongPromptTokens, o.longMaxTokens())
	}
	if o.HugePages > 0 {
		c.huge = hugePages(o.HugePages, o.crowdPages())
		c.hugeBody = openai.ChatBody(o.Provider.Models[0], o.MaxTokens, promptText(o.Text, o.HugePromptTokens))
	}
	return c
}

// of is the request of user's page index. An index past the book, as the steady case's calls
// have, is taken round it, and is never huge.
func (c crowdBodies) of(user, index int) []byte {
	switch {
	case index < c.pages && c.huge[user*c.pages+index]:
		return c.hugeBody
	case isLongUser(user, c.longShare):
		return c.long[index%c.pages]
	}
	return c.short[index%c.pages]
}

// isLongUser reports whether user u falls in the share of users whose pages are long, spread
// evenly: at 0.5 every other user, from user 1.
func isLongUser(u int, share float64) bool {
	return math.Floor(float64(u+1)*share) > math.Floor(float64(u)*share)
}

// hugePages are the numbers of n huge pages spread evenly over the crowd's total pages, user u's
// page i being number u×pages+i: each in the middle of its nth of them.
func hugePages(n, total int) map[int]bool {
	huge := make(map[int]bool, n)
	for j := range n {
		huge[(2*j+1)*total/(2*n)] = true
	}
	return huge
}

// bookBodies are the requests of a book's pages, one by index: a chat of prompt and maxTokens,
// each scaled by a factor between 1-SizeSpread and 1+SizeSpread (the same for both, its mean 1),
// its prompt in Text.
func bookBodies(o Options, prompt, maxTokens int64) [][]byte {
	bodies := make([][]byte, o.Pages)
	for i := range bodies {
		scale := pageScale(i, o.SizeSpread)
		bodies[i] = openai.ChatBody(o.Provider.Models[0], scaled(maxTokens, scale), promptText(o.Text, scaled(prompt, scale)))
	}
	return bodies
}

// pageScale is page i's size as a share of the size asked for: between 1-spread and 1+spread,
// spread evenly over the pages.
func pageScale(i int, spread float64) float64 {
	if spread == 0 {
		return 1
	}
	_, frac := math.Modf(float64(i) * goldenRatio)
	return 1 - spread + 2*spread*frac
}

// scaled is tokens times scale, rounded, and at least 1.
func scaled(tokens int64, scale float64) int64 {
	return max(int64(math.Round(float64(tokens)*scale)), 1)
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
		return fmt.Errorf("ramp: options: unknown text %q: must be %s, %s, %s or %s", text, TextFiller, TextDense, TextSparse, TextCode)
	}
	return nil
}
