package v1

import (
	"math"
	"math/bits"
	"slices"
)

// Tokens are what a call used, by the classes of token a provider bills at
// their own prices. The classes of the prompt are parts of Prompt, those of
// the completion parts of Completion; what no class holds is plain input or
// output. The zero Tokens costs nothing.
type Tokens struct {
	// Prompt is every prompt token, of every class.
	Prompt int64
	// CachedPrompt are the prompt tokens the provider read from its cache.
	CachedPrompt int64
	// CacheWrite are the prompt tokens the provider wrote to its cache.
	CacheWrite int64
	// AudioPrompt are the prompt tokens of audio.
	AudioPrompt int64
	// Completion is every completion token, reasoning and audio included.
	Completion int64
	// Reasoning are the completion tokens the model reasoned with: output,
	// priced as such, and counted apart only to be seen.
	Reasoning int64
	// AudioCompletion are the completion tokens of audio.
	AudioCompletion int64
}

// PlainPrompt returns the prompt tokens of no class: Prompt less its
// classes, at least zero. A negative count counts as zero.
func (t Tokens) PlainPrompt() int64 {
	classes := addSat(addSat(max(t.CachedPrompt, 0), max(t.CacheWrite, 0)), max(t.AudioPrompt, 0))
	return max(max(t.Prompt, 0)-classes, 0)
}

// PlainCompletion returns the completion tokens of text, reasoning included:
// Completion less its audio, at least zero. A negative count counts as zero.
func (t Tokens) PlainCompletion() int64 {
	return max(max(t.Completion, 0)-max(t.AudioCompletion, 0), 0)
}

// addSat adds two counts of zero or more, stopping at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CostMicros returns what t costs at the prices of service tier tier, in
// micro-dollars: each class of token at its own price, rounded up once, so
// that spend is never under-counted (see MicroPrices.CostMicros).
func (p Prices) CostMicros(tier string, t Tokens) int64 {
	return p.Micro().CostMicros(tier, t)
}

// isStandardTier reports whether a service tier names the standard prices,
// those of Prices itself: "auto", "default" or none.
func isStandardTier(tier string) bool {
	return tier == "" || tier == "auto" || tier == "default"
}

// priceClass is a class of token a provider prices on its own.
type priceClass int

// The classes of token, in the order of classPrices.
const (
	classInput priceClass = iota
	classCachedInput
	classCacheWrite
	classAudioInput
	classOutput
	classAudioOutput
	numClasses
)

// classFields are the JSON names of each class's price.
var classFields = [numClasses]string{"inputPerMillion", "cachedInputPerMillion", "cacheWritePerMillion",
	"audioInputPerMillion", "outputPerMillion", "audioOutputPerMillion"}

// fallback is the class whose price a class's price left empty is: the
// prompt's classes fall back to input, audio output to output.
var fallback = [numClasses]priceClass{classInput, classInput, classInput, classInput, classOutput, classOutput}

// classPrices are the prices of one tier, by class: Prices' own, or a
// TierPrices'.
type classPrices [numClasses]*Money

func (p *Prices) classes() classPrices {
	return classPrices{&p.InputPerMillion, &p.CachedInputPerMillion, &p.CacheWritePerMillion,
		&p.AudioInputPerMillion, &p.OutputPerMillion, &p.AudioOutputPerMillion}
}

func (t *TierPrices) classes() classPrices {
	return classPrices{&t.InputPerMillion, &t.CachedInputPerMillion, &t.CacheWritePerMillion,
		&t.AudioInputPerMillion, &t.OutputPerMillion, &t.AudioOutputPerMillion}
}

// rates are one tier's prices read into micro-dollars per million tokens, by
// class.
type rates [numClasses]int64

// rates reads c; a malformed price, which a validated Config does not have,
// reads as zero.
func (c classPrices) rates() rates {
	var r rates
	for k, m := range c {
		r[k], _ = m.MicroDollars()
	}
	return r
}

// MicroPrices are Prices read into micro-dollars per million tokens, each
// class's price at each tier, with the prices left empty at those they fall
// back to, once, so that costing a call parses nothing. The zero MicroPrices
// is free. It is immutable.
type MicroPrices struct {
	standard rates
	tiers    []tierRates
}

// tierRates are a named tier's rates.
type tierRates struct {
	name  string
	rates rates
}

// Micro reads p into micro-dollars; a malformed price, which a validated
// Config does not have, reads as zero.
func (p Prices) Micro() MicroPrices {
	p.Tiers = slices.Clone(p.Tiers) // defaults writes to them
	p.defaults()
	m := MicroPrices{standard: p.classes().rates()}
	for i := range p.Tiers {
		m.tiers = append(m.tiers, tierRates{name: p.Tiers[i].Name, rates: p.Tiers[i].classes().rates()})
	}
	return m
}

// at returns the rates of service tier tier: the standard ones for a
// standard tier or one p does not list.
func (p *MicroPrices) at(tier string) *rates {
	if !isStandardTier(tier) {
		for i := range p.tiers {
			if p.tiers[i].name == tier {
				return &p.tiers[i].rates
			}
		}
	}
	return &p.standard
}

// CostMicros returns what t costs at the prices of service tier tier (see
// Prices.Tiers), in micro-dollars: the plain prompt tokens (see
// Tokens.PlainPrompt) at the input price, cached ones, cache writes and audio
// at their own, the plain completion tokens at the output price and audio at
// its own, summed exactly and rounded up once, so that spend is never
// under-counted. A cost past math.MaxInt64 micro-dollars saturates there.
// Negative counts count as zero.
func (p MicroPrices) CostMicros(tier string, t Tokens) int64 {
	r := p.at(tier)
	var sum wide
	sum.addProduct(t.PlainPrompt(), r[classInput])
	sum.addProduct(t.CachedPrompt, r[classCachedInput])
	sum.addProduct(t.CacheWrite, r[classCacheWrite])
	sum.addProduct(t.AudioPrompt, r[classAudioInput])
	sum.addProduct(t.PlainCompletion(), r[classOutput])
	sum.addProduct(t.AudioCompletion, r[classAudioOutput])
	return sum.ceilMillionths()
}

// wide is a sum of counts times prices, in 128 bits, that notes when it
// overflows them.
type wide struct {
	hi, lo   uint64
	overflow bool
}

// addProduct adds a·b to w, a negative factor counting as zero.
func (w *wide) addProduct(a, b int64) {
	if a <= 0 || b <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	var carry uint64
	w.lo, carry = bits.Add64(w.lo, lo, 0)
	w.hi, carry = bits.Add64(w.hi, hi, carry)
	w.overflow = w.overflow || carry != 0
}

// ceilMillionths returns ⌈w / 10^6⌉, saturated at math.MaxInt64.
func (w *wide) ceilMillionths() int64 {
	if w.overflow {
		return math.MaxInt64
	}
	lo, carry := bits.Add64(w.lo, microsPerDollar-1, 0)
	hi := w.hi + carry
	if hi >= microsPerDollar || hi < w.hi { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, microsPerDollar)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// PricesOf returns the prices of calls to m, one of p's models: m's own when
// it has them, else p's.
func (p *Provider) PricesOf(m *Model) *Prices {
	if m.Prices != nil {
		return m.Prices
	}
	return &p.Prices
}
