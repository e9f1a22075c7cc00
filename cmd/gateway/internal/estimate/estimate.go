package estimate

import "math"

// Estimate is the token cost of a request before the call. Both counts are
// zero or more; the zero Estimate costs nothing.
type Estimate struct {
	// PromptTokens is the prompt as counted by the encoding, plus fixed costs.
	PromptTokens int64
	// CompletionTokens is the most the provider may generate for the request.
	CompletionTokens int64
	// CharacterPromptTokens is the prompt with every text counted by the proxy, ceil(UTF-8
	// bytes / 4), as a provider that counts characters when it admits a call counts it;
	// PromptTokens when the encoding is the proxy already.
	CharacterPromptTokens int64
	// MaxPromptTokens is the most prompt tokens the provider can bill the request: a token for
	// each byte of its body besides what the prompt counted without text (images), no tokenizer
	// making more tokens than bytes, and never less than PromptTokens. A Responses request may bring in input the provider keeps
	// (an earlier response, a conversation, files, tools): only math.MaxInt64 bounds it.
	MaxPromptTokens int64
}

// Total returns the prompt and completion tokens together.
func (e Estimate) Total() int64 {
	return addSat(e.PromptTokens, e.CompletionTokens)
}

// CharacterTotal returns the prompt counted by the proxy and the completion tokens together:
// what a provider that counts characters when it admits a call counts, whatever the encoding's
// count.
func (e Estimate) CharacterTotal() int64 {
	return addSat(e.CharacterPromptTokens, e.CompletionTokens)
}

// Estimate returns the cost of r, counting its prompt with c under encoding
// (see [Counter.Count]). Completion tokens are r.MaxTokens, or
// defaultMaxTokens when the request sets none, times r.N; embeddings and
// moderations have none. A nil c counts with the proxy. Counts that would overflow stop at
// math.MaxInt64.
func (r *Request) Estimate(c *Counter, encoding string, defaultMaxTokens int64) Estimate {
	prompt := r.Prompt.count(c, encoding)
	return Estimate{
		PromptTokens:          prompt,
		CompletionTokens:      r.completionTokens(defaultMaxTokens),
		CharacterPromptTokens: r.Prompt.count(nil, ""),
		MaxPromptTokens:       max(r.maxPromptTokens(), prompt),
	}
}

// maxPromptTokens is the most prompt tokens the provider can bill r (see Estimate.MaxPromptTokens).
func (r *Request) maxPromptTokens() int64 {
	if r.Endpoint == Responses {
		return math.MaxInt64
	}
	return addSat(r.Size, max(r.Prompt.Tokens, 0))
}

// count returns the prompt tokens.
func (p Prompt) count(c *Counter, encoding string) int64 {
	n := max(p.Tokens, 0)
	for _, text := range p.Texts {
		n = addSat(n, c.countBytes(encoding, text))
	}
	return n
}

// completionTokens returns the most the provider may generate.
func (r *Request) completionTokens(defaultMaxTokens int64) int64 {
	if r.Endpoint == Embeddings || r.Endpoint == Moderations || r.Endpoint == CountTokens {
		return 0
	}
	limit := r.MaxTokens
	if limit <= 0 {
		limit = defaultMaxTokens
	}
	return mulSat(max(limit, 0), max(r.N, 1))
}

// addSat adds two counts, stopping at math.MaxInt64.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat multiplies two counts of zero or more, stopping at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
