package estimate

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	_ "image/gif" // DecodeConfig reads the sizes of GIF data URLs
	_ "image/jpeg"
	_ "image/png"
	"maps"
	"slices"
	"strings"
)

// imageFormula is how one family of models counts an image of w×h pixels; w and h are zero
// when the size is not known before the call (an image given by URL), and the formula then
// counts the largest image it can take. low is a detail of "low".
type imageFormula func(w, h int64, low bool) int64

// tiles is OpenAI's formula for gpt-4o-class models: base tokens, and at high detail perTile
// for each 512-pixel tile of the image once it is scaled to fit a 2048-pixel square and then
// down to a shortest side of 768 pixels. Low detail is base alone.
func tiles(base, perTile int64) imageFormula {
	return func(w, h int64, low bool) int64 {
		if low {
			return base
		}
		return base + perTile*tileCount(w, h)
	}
}

// tileCount is the number of 512-pixel tiles of a w×h image once scaled; an image of unknown
// size counts the most there can be, 2 × 4 (768 × 2048).
func tileCount(w, h int64) int64 {
	if w <= 0 || h <= 0 {
		return 8
	}
	if longest := max(w, h); longest > 2048 {
		w, h = w*2048/longest, h*2048/longest
	}
	if shortest := min(w, h); shortest > 768 {
		w, h = w*768/shortest, h*768/shortest
	}
	return ceilDiv(max(w, 1), 512) * ceilDiv(max(h, 1), 512)
}

// patches is OpenAI's formula for its patch-counting models: a token for each 32-pixel patch
// of the image, at most 1536, times the model's multiplier in thousandths. Detail does not
// change it. An image of unknown size counts 1536 patches.
func patches(perMille int64) imageFormula {
	return func(w, h int64, _ bool) int64 {
		n := int64(maxPatches)
		if w > 0 && h > 0 {
			n = min(ceilDiv(w, 32)*ceilDiv(h, 32), maxPatches)
		}
		return ceilDiv(n*perMille, 1000)
	}
}

// maxPatches is the most patches an image counts: a larger one is scaled down to fit.
const maxPatches = 1536

// gpt4oImages is the formula of gpt-4o, gpt-4.1 and gpt-4.5, and of every model not in
// imageFamilies.
var gpt4oImages = tiles(85, 170)

// imageFamilies are the formulas of OpenAI's vision models, by model name prefix, as OpenAI's
// vision guide gives them (https://platform.openai.com/docs/guides/images-vision, "Calculating
// costs"); the longest prefix that matches wins.
var imageFamilies = map[string]imageFormula{
	"gpt-4o":               gpt4oImages,
	"chatgpt-4o":           gpt4oImages,
	"gpt-4-turbo":          gpt4oImages,
	"gpt-4.1":              gpt4oImages,
	"gpt-4.5":              gpt4oImages,
	"gpt-4o-mini":          tiles(2833, 5667),
	"gpt-5":                tiles(70, 140),
	"o1":                   tiles(75, 150),
	"o3":                   tiles(75, 150),
	"computer-use-preview": tiles(65, 129),
	"gpt-4.1-mini":         patches(1620),
	"gpt-4.1-nano":         patches(2460),
	"gpt-5-mini":           patches(1620),
	"gpt-5-nano":           patches(2460),
	"o4-mini":              patches(1720),
}

// imagePrefixes are the prefixes of imageFamilies, the longest first.
var imagePrefixes = func() []string {
	prefixes := slices.Collect(maps.Keys(imageFamilies))
	slices.SortFunc(prefixes, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return prefixes
}()

// imageFormulaOf is the formula of model's family: that of the longest prefix of its name in
// imageFamilies, else gpt-4o's.
func imageFormulaOf(model string) imageFormula {
	for _, prefix := range imagePrefixes {
		if strings.HasPrefix(model, prefix) {
			return imageFamilies[prefix]
		}
	}
	return gpt4oImages
}

// imagePart is what an image_url part says of its image: its URL, which may be a data URL,
// and its detail.
type imagePart struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

// imageTokens is what an image part counts under formula. The size of an image sent inline as
// a PNG, JPEG or GIF data URL is read from its header; any other image counts as the largest.
// A detail other than "low" counts as high, as "auto" may be. It refuses an image_url object
// with a key that is ambiguous (see read).
func imageTokens(formula imageFormula, imageURL json.RawMessage) (int64, error) {
	var part imagePart
	switch firstByte(imageURL) {
	case '{':
		if _, err := read(imageURL, &part); err != nil {
			if errors.Is(err, ErrAmbiguousKey) {
				return 0, err
			}
			part = imagePart{} // unreadable: the largest, at high detail
		}
	case '"':
		_ = json.Unmarshal(imageURL, &part.URL)
	}
	w, h := dataURLSize(part.URL)
	return formula(w, h, part.Detail == "low"), nil
}

// dataURLSize is the size of a base64 data URL's image, or zeros when url is not one or its
// image is in a format the package does not read. Only the image's header is decoded.
func dataURLSize(url string) (int64, int64) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return 0, 0
	}
	_, data, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return 0, 0
	}
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0
	}
	return int64(cfg.Width), int64(cfg.Height)
}

// ceilDiv is a / b rounded up, for a of zero or more and b positive.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
