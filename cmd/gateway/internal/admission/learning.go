package admission

import (
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// What a provider's answers teach of its limits is its word, and a wrong word (a bug, a proxy's
// header, an account changed since) must not hold its calls down for good. A learned limit is
// bounded below (see policy.Lower), expires, and a call larger than it goes as a probe (see
// policy.Provider.TokensTaken).
const (
	// learnedTTL is how long a learned limit holds without an answer that reports it again; then
	// it is forgotten and the configured limit is back.
	learnedTTL = 5 * time.Minute
	// confirmEvery is how often an answer that reports what the last one did is learned from all
	// the same, to confirm the limits learned from it.
	confirmEvery = 10 * time.Second
)

// confirmations are when an answer last reported each of a provider's limits, by dimension.
type confirmations map[gatewayv1.Dimension]time.Time

// confirm notes the limits an answer at now reported.
func (c *confirmations) confirm(reported gatewayv1.LearnedLimits, now time.Time) {
	if *c == nil {
		*c = confirmations{}
	}
	for _, dim := range gatewayv1.LearnedDimensions() {
		if reported.Of(dim) > 0 {
			(*c)[dim] = now
		}
	}
}

// unexpired is what h learned, without the limits no answer confirmed within learnedTTL of now.
// The caller holds h.mu.
func (h *health) unexpired(now time.Time) gatewayv1.LearnedLimits {
	return h.learned.Combine(gatewayv1.LearnedLimits{}, func(dim gatewayv1.Dimension, learned, _ int64) int64 {
		if now.Sub(h.confirmed[dim]) >= learnedTTL {
			return 0
		}
		return learned
	})
}

// forgetStale forgets the limits learned from the provider that no answer confirmed within
// learnedTTL of now, and reports whether it forgot any.
func (h *health) forgetStale(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	learned := h.unexpired(now)
	if learned == h.learned {
		return false
	}
	h.learned = learned
	h.lastReport = nil // the next answer learns again, whatever it reports
	return true
}

// served is what a provider was seen to serve: of each kind of tokens, the largest call, in the
// tokens it counted, within learnedTTL. A provider that served a call holds at least that many
// tokens of the kind a minute, whatever its headers say.
type served [kinds]largest

// largest is the largest call of one kind of tokens served, and when.
type largest struct {
	tokens int64
	at     time.Time
}

// add notes a call of tokens served at now: it replaces the largest when it is as large, or when
// the largest is older than learnedTTL.
func (l *largest) add(tokens int64, now time.Time) {
	if tokens >= l.tokens || now.Sub(l.at) >= learnedTTL {
		l.tokens, l.at = tokens, now
	}
}

// within is the largest call served within learnedTTL of now; zero for none.
func (l largest) within(now time.Time) int64 {
	if now.Sub(l.at) >= learnedTTL {
		return 0
	}
	return l.tokens
}

// evidence is the floor what was served at now puts under the limits learned (see
// policy.Lower): zero fields for none.
func (s *served) evidence(now time.Time) gatewayv1.LearnedLimits {
	return gatewayv1.LearnedLimits{
		TokensPerMinute:       s[allTokens].within(now),
		InputTokensPerMinute:  s[inputTokens].within(now),
		OutputTokensPerMinute: s[outputTokens].within(now),
	}
}

// learnedKinds are the learned limits of each kind of tokens.
var learnedKinds = [kinds]gatewayv1.Dimension{gatewayv1.DimensionTokens, gatewayv1.DimensionInputTokens, gatewayv1.DimensionOutputTokens}

// servedCall notes a call the provider served at now, which took tokens of each kind. A call
// larger than a limit learned raises its floor: the next answer learns again. The caller holds
// h.mu.
func (h *health) servedCall(tokens byKind, now time.Time) {
	for k, n := range tokens {
		h.served[k].add(n, now)
		if l := h.learned.Of(learnedKinds[k]); l > 0 && n > l {
			h.lastReport = nil
		}
	}
}

// ForgetStale forgets the limits learned from each provider that no answer has reported again
// for a few minutes (learnedTTL), and reports whether it forgot any: the caller then compiles the
// configuration anew with Learned, as after Reported, so that the configured limits are back.
// Call it every few seconds.
func (g *Gate) ForgetStale() bool {
	now, forgot := g.now(), false
	g.dispatchers.Range(func(_, d any) bool {
		forgot = d.(*dispatcher).health.forgetStale(now) || forgot
		return true
	})
	return forgot
}
