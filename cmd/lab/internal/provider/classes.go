package provider

import (
	"cmp"
	"math"
	"math/big"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// A call's tokens fall into classes, each priced apart, as a provider of
// 2026 bills them:
//
//   - its prompt is its text, whose leading tokens may be read from the
//     cache (cached), and, for a chat, its audio parts; a Messages call to
//     an Anthropic account may also write some of its prompt to the cache,
//     for five minutes or for an hour;
//   - its completion is what the model reasons (for a reasoning model, in
//     a chat or a response), which the answer does not show, and then its
//     answer, up to the call's cap or [Options.AnswerTokens], of which
//     half, rounded down, is audio when a chat asks for audio.
//
// The bill is each class at its price per million, the sum times the
// multiplier of the tier that served the call, rounded up to a whole
// micro-dollar. For example, at the default options, a chat to o3 at the
// priority tier with 2,000 tokens of text whose first 1,200 tokens were
// the whole text of a chat to o3 a minute before, one input_audio part,
// modalities text and audio, and max_completion_tokens 300 is billed
//
//	prompt      2,500 = 1,152 cached + 500 audio + 848 text
//	completion    300 = 100 reasoning + 100 audio + 100 text
//	micro-dollars = ⌈2 × (848×3 + 1,152×0.3 + 500×40 + 200×3 + 100×80)⌉ = 62,980
//
// (prices in dollars per million, which are micro-dollars per token).

// ask is one call as the provider plans it before admission: what it asks
// of the account, and what it makes if it is served whole.
type ask struct {
	model string
	// tier is the tier that serves it: one of openai's Tier constants, or
	// empty for the default.
	tier string
	// text is the prompt's text, for the cache.
	text prefix
	// whole is its bill if it is served whole, without its cached tokens,
	// which admission finds, and unpriced.
	whole Bill
	// cap is the completion tokens it is counted for when it is admitted.
	cap int64
}

// chatAsk plans a call to the chat, completions or embeddings endpoint.
// Only a chat has text to cache, reasons, hears and speaks audio, and is
// served at a tier.
func (o Options) chatAsk(req openai.Request) ask {
	var reasoning int64
	if req.Endpoint == openai.Chat {
		reasoning = o.reasoning(req.Model)
	}
	a := ask{model: req.Model, tier: req.ServiceTier, text: prefixOf(req.PromptText), cap: req.CompletionTokens}
	a.whole = o.completion(req.CompletionTokens, reasoning)
	if req.Audio {
		a.whole = spoken(a.whole)
	}
	audio := req.AudioParts * o.AudioTokensPerPart
	a.whole.InputTokens, a.whole.AudioInputTokens = req.PromptTokens+audio, audio
	return a
}

// reasoning is how many tokens model reasons before it answers a chat or
// a response.
func (o Options) reasoning(model string) int64 {
	if o.reasons(model) {
		return o.ReasoningTokens
	}
	return 0
}

// completion is the completion of a call capped at limit whose model
// reasons reasoning tokens first, as its bill shows it.
func (o Options) completion(limit, reasoning int64) Bill {
	b := Bill{ReasoningTokens: min(reasoning, limit)}
	answer := limit - b.ReasoningTokens
	if o.AnswerTokens > 0 {
		answer = min(answer, o.AnswerTokens)
	}
	b.OutputTokens = b.ReasoningTokens + answer
	return b
}

// spoken is b with half its answer, rounded down, in audio.
func spoken(b Bill) Bill {
	b.AudioOutputTokens = (b.OutputTokens - b.ReasoningTokens) / 2
	return b
}

// answerText is the text of the answer billed b: what it answered, less
// its audio.
func answerText(b Bill) string {
	return openai.Filler(b.OutputTokens - b.ReasoningTokens - b.AudioOutputTokens)
}

// reasons reports whether model reasons: its name begins with one of
// ReasoningModels, or, if that is nil, with "o" and a digit or "gpt-5".
func (o Options) reasons(model string) bool {
	if o.ReasoningModels == nil {
		return len(model) > 1 && model[0] == 'o' && '0' <= model[1] && model[1] <= '9' || strings.HasPrefix(model, "gpt-5")
	}
	for _, p := range o.ReasoningModels {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// charge is what a call billed b (its cached tokens known) and capped at
// limit counts in the minute when it is admitted.
func (o Options) charge(b Bill, limit int64) counts {
	input := b.InputTokens
	if !o.CachedCountsAsInput {
		input -= b.CachedInputTokens
	}
	return counts{allTokens: b.InputTokens + limit, inputTokens: input, outputTokens: limit}
}

// price is b with what it costs at o's prices for tier, in micro-dollars:
// each class at its price per million, the sum times the tier's
// multiplier, rounded up.
func (o Options) price(b Bill, tier string) Bill {
	sum := new(big.Int)
	for _, c := range []struct{ tokens, price int64 }{
		{b.InputTokens - b.CachedInputTokens - b.AudioInputTokens - b.CacheWrite5mInputTokens - b.CacheWrite1hInputTokens, o.InputMicrosPerMillion},
		{b.CachedInputTokens, o.cachedInputPrice()},
		{b.CacheWrite5mInputTokens, cmp.Or(o.CacheWriteInputMicrosPerMillion, o.InputMicrosPerMillion*5/4)},
		{b.CacheWrite1hInputTokens, cmp.Or(o.CacheWrite1hInputMicrosPerMillion, o.InputMicrosPerMillion*2)},
		{b.AudioInputTokens, o.AudioInputMicrosPerMillion},
		{b.OutputTokens - b.AudioOutputTokens, o.OutputMicrosPerMillion},
		{b.AudioOutputTokens, o.AudioOutputMicrosPerMillion},
	} {
		sum.Add(sum, new(big.Int).Mul(big.NewInt(c.tokens), big.NewInt(c.price)))
	}
	const per = 1_000_000 * 1_000_000 // a million tokens, and the multiplier's millionths
	sum.Mul(sum, big.NewInt(o.multiplier(tier)))
	sum.Add(sum, big.NewInt(per-1))
	b.MicroDollars = sum.Quo(sum, big.NewInt(per)).Int64()
	return b
}

// cachedInputPrice is the price of a million cached prompt tokens.
func (o Options) cachedInputPrice() int64 {
	if o.CachedInputMicrosPerMillion == 0 {
		return o.InputMicrosPerMillion / 10
	}
	return o.CachedInputMicrosPerMillion
}

// multiplier is tier's multiplier, in millionths.
func (o Options) multiplier(tier string) int64 {
	switch tier {
	case openai.TierPriority:
		return millionths(o.PriorityMultiplier)
	case openai.TierFlex:
		return millionths(o.FlexMultiplier)
	}
	return 1_000_000
}

// millionths is m in millionths, rounded; 0 for a multiplier that is not
// a positive number that fits.
func millionths(m float64) int64 {
	if !(m > 0 && m < math.MaxInt64/1e6) {
		return 0
	}
	return int64(math.Round(m * 1e6))
}
