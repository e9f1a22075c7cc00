package provider

import (
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// Stats are a provider's counts since it started.
type Stats struct {
	// Accepted counts calls admitted.
	Accepted int64 `json:"accepted"`
	// Rejected429Requests counts 429s because the minute's requests ran out.
	Rejected429Requests int64 `json:"rejected429Requests"`
	// Rejected429Tokens counts 429s because the minute's tokens ran out,
	// or the request alone was larger than the minute allows.
	Rejected429Tokens int64 `json:"rejected429Tokens"`
	// Rejected429InputTokens counts 429s because the minute's input tokens
	// ran out, or the request's alone were more than the minute allows.
	Rejected429InputTokens int64 `json:"rejected429InputTokens"`
	// Rejected429OutputTokens counts 429s because the minute's output
	// tokens ran out, or the request's cap alone was more than the minute
	// allows.
	Rejected429OutputTokens int64 `json:"rejected429OutputTokens"`
	// Rejected429RequestsPerDay counts 429s because the day's requests ran
	// out.
	Rejected429RequestsPerDay int64 `json:"rejected429RequestsPerDay"`
	// Rejected429CountTokens counts the 429s of an Anthropic account's
	// count_tokens requests because their own minute's requests ran out.
	Rejected429CountTokens int64 `json:"rejected429CountTokens"`
	// Rejected503 counts the calls refused because too many were in
	// flight: 503s, or 529s on an Anthropic account.
	Rejected503 int64 `json:"rejected503"`
	// Canceled counts admitted calls whose client left before the answer,
	// and background responses the provider stopped as it closed. They are
	// not billed, but count in the minute, all but their output; but an
	// Anthropic account bills a Messages call its input and the output
	// made before its client left, and counts that output.
	Canceled int64 `json:"canceled"`
	// InFlight is how many calls are running now, background responses
	// included.
	InFlight int64 `json:"inFlight"`
	// MaxInFlightSeen is the most calls that ran at once.
	MaxInFlightSeen int64 `json:"maxInFlightSeen"`
	// PromptTokens counts the prompt tokens of the calls served, cached and
	// audio included: for a response, its input tokens, hidden context
	// included.
	PromptTokens int64 `json:"promptTokens"`
	// CachedPromptTokens counts the prompt tokens read from the cache.
	CachedPromptTokens int64 `json:"cachedPromptTokens"`
	// CacheWrite5mPromptTokens and CacheWrite1hPromptTokens count the
	// prompt tokens an Anthropic account wrote to its cache for five
	// minutes and for an hour.
	CacheWrite5mPromptTokens int64 `json:"cacheWrite5mPromptTokens"`
	CacheWrite1hPromptTokens int64 `json:"cacheWrite1hPromptTokens"`
	// AudioPromptTokens counts the audio prompt tokens.
	AudioPromptTokens int64 `json:"audioPromptTokens"`
	// CompletionTokens counts the completion tokens of the calls served,
	// reasoning and audio included.
	CompletionTokens int64 `json:"completionTokens"`
	// ReasoningTokens counts the completion tokens the models reasoned, or
	// thought.
	ReasoningTokens int64 `json:"reasoningTokens"`
	// AudioCompletionTokens counts the audio completion tokens.
	AudioCompletionTokens int64 `json:"audioCompletionTokens"`
	// MicroDollars is what the calls served cost, in millionths of a
	// dollar.
	MicroDollars int64 `json:"microDollars"`
	// Tiers are what the calls served were billed at each service tier.
	// They add up to the totals above.
	Tiers TierBills `json:"tiers"`
	// BatchLines counts the lines of batches served; BatchesRefused the
	// batches failed at once for passing the enqueued token limit.
	BatchLines     int64 `json:"batchLines"`
	BatchesRefused int64 `json:"batchesRefused"`
	// Received counts the API requests received, whatever their answer, by
	// the route that took them, such as "POST /v1/chat/completions" or
	// "GET /v1/responses/{id}"; "/" takes the paths the API does not have.
	Received map[string]int64 `json:"received"`
	// Responses count the Responses API's responses. What they were billed
	// is also in the totals above.
	Responses ResponsesStats `json:"responses"`
}

// ResponsesStats count the responses of the Responses API.
type ResponsesStats struct {
	// Stored is how many responses the provider keeps now.
	Stored int64 `json:"stored"`
	// Completed counts the foreground responses that completed.
	Completed int64 `json:"completed"`
	// BackgroundCompleted counts the background responses that completed.
	BackgroundCompleted int64 `json:"backgroundCompleted"`
	// BackgroundCancelled counts the background responses cancelled
	// before they completed.
	BackgroundCancelled int64 `json:"backgroundCancelled"`
	// Foreground is what the foreground responses that completed were
	// billed.
	Foreground Bill `json:"foreground"`
	// Background is what the background responses were billed when they
	// ended, completed or cancelled.
	Background Bill `json:"background"`
}

// TierBills are what calls were billed at each service tier.
type TierBills struct {
	Default  Bill `json:"default"`
	Priority Bill `json:"priority"`
	Flex     Bill `json:"flex"`
}

// of is the bill of tier, one of openai's Tier constants; any other is the
// default's.
func (t *TierBills) of(tier string) *Bill {
	switch tier {
	case openai.TierPriority:
		return &t.Priority
	case openai.TierFlex:
		return &t.Flex
	}
	return &t.Default
}

// Bill is what calls were billed, by class of token. Each class of input
// is also counted in InputTokens, and each class of output in
// OutputTokens. The classes priced apart (see [Options]) are the text
// input neither read from nor written to the cache, InputTokens -
// CachedInputTokens - CacheWrite5mInputTokens - CacheWrite1hInputTokens -
// AudioInputTokens (the cache holds only text); the cached input; the input
// written to the cache for five minutes, and for an hour; the audio input;
// the output other than audio, OutputTokens - AudioOutputTokens, reasoning
// included; and the audio output.
type Bill struct {
	// InputTokens counts their input (prompt) tokens.
	InputTokens int64 `json:"inputTokens"`
	// CachedInputTokens counts the input tokens read from the cache.
	CachedInputTokens int64 `json:"cachedInputTokens"`
	// CacheWrite5mInputTokens and CacheWrite1hInputTokens count the input
	// tokens an Anthropic account wrote to its cache for five minutes and
	// for an hour.
	CacheWrite5mInputTokens int64 `json:"cacheWrite5mInputTokens"`
	CacheWrite1hInputTokens int64 `json:"cacheWrite1hInputTokens"`
	// AudioInputTokens counts the audio input tokens.
	AudioInputTokens int64 `json:"audioInputTokens"`
	// OutputTokens counts their output (completion) tokens.
	OutputTokens int64 `json:"outputTokens"`
	// ReasoningTokens counts the output tokens the model reasoned.
	ReasoningTokens int64 `json:"reasoningTokens"`
	// AudioOutputTokens counts the audio output tokens.
	AudioOutputTokens int64 `json:"audioOutputTokens"`
	// MicroDollars is what they cost, in millionths of a dollar, each call
	// rounded up.
	MicroDollars int64 `json:"microDollars"`
}

func (b *Bill) add(c Bill) {
	b.InputTokens += c.InputTokens
	b.CachedInputTokens += c.CachedInputTokens
	b.CacheWrite5mInputTokens += c.CacheWrite5mInputTokens
	b.CacheWrite1hInputTokens += c.CacheWrite1hInputTokens
	b.AudioInputTokens += c.AudioInputTokens
	b.OutputTokens += c.OutputTokens
	b.ReasoningTokens += c.ReasoningTokens
	b.AudioOutputTokens += c.AudioOutputTokens
	b.MicroDollars += c.MicroDollars
}

// limits are an account's limits. requests and inFlight are positive;
// perDay, countTokens and tokens are zero for none, but tokens[allTokens]
// is positive on an OpenAI account.
type limits struct {
	requests    int64  // in the rolling minute
	perDay      int64  // in the day
	tokens      counts // in the rolling minute, by measure
	inFlight    int64
	countTokens int64 // count_tokens requests in their own rolling minute
}

// outcome is what the account decides about a call.
type outcome int

const (
	admitted outcome = iota
	requestsExhausted
	dayExhausted
	tokensExhausted
	inputExhausted
	outputExhausted
	overloaded
)

// exhausted is the outcome of a call refused for each measure.
var exhausted = [measures]outcome{allTokens: tokensExhausted, inputTokens: inputExhausted, outputTokens: outputExhausted}

// decision is the account's answer to one call.
type decision struct {
	outcome outcome
	// retryAfter is how long until the call would fit, for a 429; zero
	// when it never fits (tooLarge) and for the other outcomes.
	retryAfter time.Duration
	// measure is what a call refused for tokens asked too many of.
	measure measure
	// tooLarge is a call refused for tokens it asks more of than the
	// whole minute allows.
	tooLarge bool
	// asked is what the call asked of the minute.
	asked counts
	// seq is where the minute counts an admitted call, for its end to
	// correct.
	seq   uint64
	quota quota
}

// quota is what the rate-limit headers report.
type quota struct {
	limitRequests, remainingRequests int64
	limitTokens, remainingTokens     int64
	// reset is how long until the rolling minute is empty again; the
	// requests and the tokens reset together.
	reset time.Duration
	// input and output are the minute's input and output tokens; their
	// limit is zero when there is none.
	input, output tokenQuota
}

// of is what q reports of k; the resetAt of allTokens is not known.
func (q quota) of(k measure) tokenQuota {
	switch k {
	case inputTokens:
		return q.input
	case outputTokens:
		return q.output
	}
	return tokenQuota{limit: q.limitTokens, remaining: q.remainingTokens}
}

// tokenQuota is what the headers report of one limit: of a measure of
// tokens, or of requests.
type tokenQuota struct {
	limit, remaining int64
	// resetAt is when the minute next holds none of them.
	resetAt time.Time
}

// requestsAt is what q, at now, reports of requests.
func (q quota) requestsAt(now time.Time) tokenQuota {
	return tokenQuota{limit: q.limitRequests, remaining: q.remainingRequests, resetAt: now.Add(q.reset)}
}

// plus is q and r as one limit, as Anthropic reports its tokens: their
// limits and what remains of them added, reset when both are. A quota
// without a limit adds nothing.
func (q tokenQuota) plus(r tokenQuota) tokenQuota {
	return tokenQuota{limit: q.limit + r.limit, remaining: q.remaining + r.remaining, resetAt: later(q.resetAt, r.resetAt)}
}

// account is the provider's book of one account: its rolling minute, its
// day, its calls in flight, the rolling minute of an Anthropic account's
// count_tokens requests, and its counts. It checks the minute's
// requests first, then the day's, then the minute's tokens, input tokens
// and output tokens, then the calls in flight. A call counts in the minute
// when it is admitted, with its prompt tokens, its cap, the prompt tokens
// that count as input, and its cap again as output, until it ends and
// counts what it made.
//
// An account needs its limits, and its day its time zone. It is not safe
// for concurrent use.
type account struct {
	limits limits
	minute minute
	day    day
	counts minute // count_tokens requests, apart
	stats  Stats
}

// admit decides about a call that asks c at now and, if it is admitted,
// counts it in the minute, the day and in flight.
func (a *account) admit(now time.Time, c counts) decision {
	a.minute.expire(now)
	a.day.roll(now)
	d := a.decide(now, c)
	if d.outcome == admitted {
		d.seq = a.minute.add(now, c)
		a.day.n++
		a.stats.InFlight++
		a.stats.MaxInFlightSeen = max(a.stats.MaxInFlightSeen, a.stats.InFlight)
	}
	a.stats.count(d.outcome)
	d.asked, d.quota = c, a.quota(now)
	return d
}

func (a *account) decide(now time.Time, c counts) decision {
	if wait := a.minute.requestWait(now, a.limits.requests); wait > 0 {
		return decision{outcome: requestsExhausted, retryAfter: wait}
	}
	if wait := a.day.wait(now, a.limits.perDay); wait > 0 {
		return decision{outcome: dayExhausted, retryAfter: wait}
	}
	for k := range measures {
		if d, ok := a.decideTokens(now, k, c[k]); !ok {
			return d
		}
	}
	if a.stats.InFlight >= a.limits.inFlight {
		return decision{outcome: overloaded}
	}
	return decision{outcome: admitted}
}

// decideTokens reports whether n more of k fit in the minute at now, and
// if not, the decision that refuses them.
func (a *account) decideTokens(now time.Time, k measure, n int64) (decision, bool) {
	limit := a.limits.tokens[k]
	switch {
	case limit == 0:
		return decision{}, true
	case n > limit:
		return decision{outcome: exhausted[k], measure: k, tooLarge: true}, false
	}
	if wait := a.minute.wait(now, k, n, limit); wait > 0 {
		return decision{outcome: exhausted[k], measure: k, retryAfter: wait}, false
	}
	return decision{}, true
}

func (s *Stats) count(o outcome) {
	switch o {
	case admitted:
		s.Accepted++
	case requestsExhausted:
		s.Rejected429Requests++
	case dayExhausted:
		s.Rejected429RequestsPerDay++
	case tokensExhausted:
		s.Rejected429Tokens++
	case inputExhausted:
		s.Rejected429InputTokens++
	case outputExhausted:
		s.Rejected429OutputTokens++
	default:
		s.Rejected503++
	}
}

// quota is what the headers report at now; the minute must have expired at
// now.
func (a *account) quota(now time.Time) quota {
	return quota{
		limitRequests:     a.limits.requests,
		remainingRequests: max(a.limits.requests-a.minute.requests(), 0),
		limitTokens:       a.limits.tokens[allTokens],
		remainingTokens:   max(a.limits.tokens[allTokens]-a.minute.sums[allTokens], 0),
		reset:             a.minute.reset(now),
		input:             a.tokenQuota(now, inputTokens),
		output:            a.tokenQuota(now, outputTokens),
	}
}

func (a *account) tokenQuota(now time.Time, k measure) tokenQuota {
	limit := a.limits.tokens[k]
	if limit == 0 {
		return tokenQuota{}
	}
	return tokenQuota{limit: limit, remaining: max(limit-a.minute.sums[k], 0), resetAt: now.Add(a.minute.resetOf(now, k))}
}

// quotaAt is the quota at now, for answers that were not decided.
func (a *account) quotaAt(now time.Time) quota {
	a.minute.expire(now)
	return a.quota(now)
}

// received counts an API request the route pattern took.
func (a *account) received(pattern string) {
	if a.stats.Received == nil {
		a.stats.Received = map[string]int64{}
	}
	a.stats.Received[pattern]++
}

// finish ends the admitted call seq, served at tier. A served call is
// billed b, and counts b's output in the minute; one whose client left is
// counted as canceled, and counts no output.
func (a *account) finish(seq uint64, tier string, served bool, b Bill) {
	a.stats.InFlight--
	if !served {
		a.minute.correct(seq, outputTokens, 0)
		a.stats.Canceled++
		return
	}
	a.minute.correct(seq, outputTokens, b.OutputTokens)
	a.stats.bill(b, tier)
}

// leave ends the admitted call seq, served at tier, whose client left
// after it made b's output: it is billed b, and counts b's output in the
// minute, as Anthropic bills and counts a call whose client leaves.
func (a *account) leave(seq uint64, tier string, b Bill) {
	a.stats.InFlight--
	a.stats.Canceled++
	a.minute.correct(seq, outputTokens, b.OutputTokens)
	a.stats.bill(b, tier)
}

// countTokens decides about a count_tokens request at now, in its own
// minute of requests: it returns how long until one fits (zero, and it is
// counted, if it fits now) and that minute's quota of requests.
// Without a limit, it always fits, and the quota is zero.
func (a *account) countTokens(now time.Time) (time.Duration, quota) {
	limit := a.limits.countTokens
	if limit == 0 {
		return 0, quota{}
	}
	a.counts.expire(now)
	wait := a.counts.requestWait(now, limit)
	if wait > 0 {
		a.stats.Rejected429CountTokens++
	} else {
		a.counts.add(now, counts{})
	}
	return wait, quota{limitRequests: limit, remainingRequests: max(limit-a.counts.requests(), 0), reset: a.counts.reset(now)}
}

// bill adds b, billed at tier, to the totals.
func (s *Stats) bill(b Bill, tier string) {
	s.PromptTokens += b.InputTokens
	s.CachedPromptTokens += b.CachedInputTokens
	s.CacheWrite5mPromptTokens += b.CacheWrite5mInputTokens
	s.CacheWrite1hPromptTokens += b.CacheWrite1hInputTokens
	s.AudioPromptTokens += b.AudioInputTokens
	s.CompletionTokens += b.OutputTokens
	s.ReasoningTokens += b.ReasoningTokens
	s.AudioCompletionTokens += b.AudioOutputTokens
	s.MicroDollars += b.MicroDollars
	s.Tiers.of(tier).add(b)
}

// ending is how an admitted response ended.
type ending int

const (
	// unserved: its client left, or the provider closed, first. It is not
	// billed.
	unserved ending = iota
	completedForeground
	completedBackground
	cancelledBackground
)

// endResponse ends the admitted response seq, served at tier, as e says,
// billed b unless it was unserved.
func (a *account) endResponse(seq uint64, tier string, e ending, b Bill) {
	a.finish(seq, tier, e != unserved, b)
	r := &a.stats.Responses
	switch e {
	case completedForeground:
		r.Completed++
		r.Foreground.add(b)
	case completedBackground:
		r.BackgroundCompleted++
		r.Background.add(b)
	case cancelledBackground:
		r.BackgroundCancelled++
		r.Background.add(b)
	}
}
