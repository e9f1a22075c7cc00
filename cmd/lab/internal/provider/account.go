package provider

import "time"

// Stats are a provider's counts since it started.
type Stats struct {
	// Accepted counts calls admitted.
	Accepted int64 `json:"accepted"`
	// Rejected429Requests counts 429s because the minute's requests ran out.
	Rejected429Requests int64 `json:"rejected429Requests"`
	// Rejected429Tokens counts 429s because the minute's tokens ran out,
	// or the request alone was larger than the minute allows.
	Rejected429Tokens int64 `json:"rejected429Tokens"`
	// Rejected503 counts 503s because too many calls were in flight.
	Rejected503 int64 `json:"rejected503"`
	// Canceled counts admitted calls whose client left before the answer,
	// and background responses the provider stopped as it closed. They are
	// not billed but count in the minute.
	Canceled int64 `json:"canceled"`
	// InFlight is how many calls are running now, background responses
	// included.
	InFlight int64 `json:"inFlight"`
	// MaxInFlightSeen is the most calls that ran at once.
	MaxInFlightSeen int64 `json:"maxInFlightSeen"`
	// PromptTokens counts the prompt tokens of the calls served: for a
	// response, its input tokens, hidden context included.
	PromptTokens int64 `json:"promptTokens"`
	// CompletionTokens counts the completion tokens of the calls served.
	CompletionTokens int64 `json:"completionTokens"`
	// MicroDollars is what the calls served cost, in millionths of a
	// dollar.
	MicroDollars int64 `json:"microDollars"`
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

// Bill is what calls were billed.
type Bill struct {
	// InputTokens counts their input (prompt) tokens.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens counts their output (completion) tokens.
	OutputTokens int64 `json:"outputTokens"`
	// MicroDollars is what they cost, in millionths of a dollar, each call
	// rounded up.
	MicroDollars int64 `json:"microDollars"`
}

func (b *Bill) add(c Bill) {
	b.InputTokens += c.InputTokens
	b.OutputTokens += c.OutputTokens
	b.MicroDollars += c.MicroDollars
}

// limits are an account's limits; each is positive.
type limits struct {
	requests, tokens, inFlight int64
}

// outcome is what the account decides about a call.
type outcome int

const (
	admitted outcome = iota
	requestsExhausted
	tokensExhausted
	overloaded
)

// decision is the account's answer to one call.
type decision struct {
	outcome outcome
	// retryAfter is how long until the call would fit, for a 429; zero
	// when it never fits (tooLarge) and for the other outcomes.
	retryAfter time.Duration
	// tooLarge is a tokensExhausted call larger than the whole minute.
	tooLarge bool
	quota    quota
}

// quota is what the rate-limit headers report.
type quota struct {
	limitRequests, remainingRequests int64
	limitTokens, remainingTokens     int64
	// reset is how long until the rolling minute is empty again; the
	// requests and the tokens reset together.
	reset time.Duration
}

// account is the provider's book of one account: its rolling minute, its
// calls in flight and its counts. It checks the minute's requests first,
// then its tokens, then the calls in flight. A call counts in the minute
// when it is admitted, with its prompt and completion tokens.
//
// The zero account has no limits and refuses everything. It is not safe
// for concurrent use.
type account struct {
	limits limits
	minute minute
	stats  Stats
}

// admit decides about a call of tokens at now and, if it is admitted,
// counts it in the minute and in flight.
func (a *account) admit(now time.Time, tokens int64) decision {
	a.minute.expire(now)
	d := a.decide(now, tokens)
	if d.outcome == admitted {
		a.minute.add(now, tokens)
		a.stats.InFlight++
		a.stats.MaxInFlightSeen = max(a.stats.MaxInFlightSeen, a.stats.InFlight)
	}
	a.stats.count(d.outcome)
	d.quota = a.quota(now)
	return d
}

func (a *account) decide(now time.Time, tokens int64) decision {
	if wait := a.minute.requestWait(now, a.limits.requests); wait > 0 {
		return decision{outcome: requestsExhausted, retryAfter: wait}
	}
	if tokens > a.limits.tokens {
		return decision{outcome: tokensExhausted, tooLarge: true}
	}
	if wait := a.minute.tokenWait(now, tokens, a.limits.tokens); wait > 0 {
		return decision{outcome: tokensExhausted, retryAfter: wait}
	}
	if a.stats.InFlight >= a.limits.inFlight {
		return decision{outcome: overloaded}
	}
	return decision{outcome: admitted}
}

func (s *Stats) count(o outcome) {
	switch o {
	case admitted:
		s.Accepted++
	case requestsExhausted:
		s.Rejected429Requests++
	case tokensExhausted:
		s.Rejected429Tokens++
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
		limitTokens:       a.limits.tokens,
		remainingTokens:   max(a.limits.tokens-a.minute.tokens, 0),
		reset:             a.minute.reset(now),
	}
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

// finish ends an admitted call. A served call is billed its tokens and
// cost; one whose client left is counted as canceled.
func (a *account) finish(served bool, prompt, completion, micros int64) {
	a.stats.InFlight--
	if !served {
		a.stats.Canceled++
		return
	}
	a.stats.PromptTokens += prompt
	a.stats.CompletionTokens += completion
	a.stats.MicroDollars += micros
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

// endResponse ends an admitted response as e says, billed b unless it was
// unserved.
func (a *account) endResponse(e ending, b Bill) {
	a.finish(e != unserved, b.InputTokens, b.OutputTokens, b.MicroDollars)
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
