package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/anthropic"
	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// anthropicRoutes serve Anthropic's Messages API.
func (s *Server) anthropicRoutes() {
	s.mux.Handle("POST /v1/messages", s.anthropicAPI(s.createMessage))
	s.mux.Handle("POST /v1/messages/count_tokens", s.anthropicAPI(s.countTokens))
	s.mux.Handle("GET /v1/models", s.anthropicAPI(func(w http.ResponseWriter, _ *http.Request) {
		anthropic.WriteModels(w, s.opts.Models)
	}))
	s.mux.Handle("GET /v1/models/{id}", s.anthropicAPI(func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); slices.Contains(s.opts.Models, id) {
			anthropic.WriteModel(w, id)
		} else {
			anthropic.UnknownModel(id).Write(w)
		}
	}))
	s.mux.Handle("/", s.anthropicAPI(func(w http.ResponseWriter, _ *http.Request) {
		anthropic.NotFound("Not found").Write(w)
	}))
}

// anthropicAPI wraps a handler of Anthropic's API: it counts the request,
// every answer carries a request id and the rate-limit headers, and only
// callers with the key and an anthropic-version get past.
func (s *Server) anthropicAPI(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := s.clock.Now()
		w.Header().Set(anthropic.RequestIDHeader, anthropic.NewRequestID())
		setAnthropicQuota(w.Header(), s.receive(r, now), now)
		switch {
		case !s.authorized(r):
			anthropic.Authentication().Write(w)
		case r.Header.Get("Anthropic-Version") == "":
			anthropic.InvalidRequest("anthropic-version: header is required").Write(w)
		default:
			h(w, r)
		}
	})
}

// messageCall is an admitted Messages call: its answer, its admission and
// the time it takes.
type messageCall struct {
	answer  anthropic.Answer
	adm     admission
	latency time.Duration
}

// createMessage handles POST /v1/messages: it reads the request, admits it
// with what the cache holds of its prompt or answers why not, and answers
// it over its latency, as events while it is made or as a Message once it
// is.
func (s *Server) createMessage(w http.ResponseWriter, hr *http.Request) {
	req, err := anthropic.Read(hr, s.opts.Models, s.opts.FileTokens)
	if err != nil {
		err.Write(w)
		return
	}
	answer := anthropic.NewAnswer(req, s.opts.ReasoningTokens, s.opts.AnswerTokens)
	adm, err := s.admitMessage(w, req, answer)
	if err != nil {
		err.Write(w)
		return
	}
	c := messageCall{answer: answer, adm: adm, latency: jitter(s.opts.Latency, s.opts.LatencyStdDev, rand.NormFloat64())}
	emit := emitter(discard)
	if req.Stream {
		openai.StartEvents(w)
		emit = writeTo(w)
	}
	if s.makeMessage(hr.Context(), c, emit) && !req.Stream {
		anthropic.WriteMessage(w, answer, messageUsage(adm.bill))
	}
}

// admitMessage admits a Messages call that answers answer, as the account
// decides, with what the cache holds of its prompt, and writes the
// rate-limit headers; or it returns the refusal to answer. An admitted
// prompt reads and writes the cache as its breakpoints say.
func (s *Server) admitMessage(w http.ResponseWriter, req anthropic.Request, answer anthropic.Answer) (admission, *anthropic.Error) {
	now := s.clock.Now()
	use := s.cache.plan(now, req.Model, req.Prompt)
	b := messageBill(req, use, answer)
	d := s.decide(now, b, req.MaxTokens)
	setAnthropicQuota(w.Header(), d.quota, now)
	if d.outcome != admitted {
		setRetryAfter(w.Header(), d.retryAfter)
		return admission{}, anthropicRefusal(d)
	}
	s.cache.keep(now, req.Model, use)
	return admission{seq: d.seq, tier: openai.TierDefault, bill: s.opts.price(b, openai.TierDefault)}, nil
}

// messageBill is the bill of a Messages call to req that answers answer
// whole, its prompt using the cache as use says.
func messageBill(req anthropic.Request, use cacheUse, answer anthropic.Answer) Bill {
	return Bill{
		InputTokens: req.Prompt.Tokens, CachedInputTokens: use.read, CacheWrite5mInputTokens: use.write5m, CacheWrite1hInputTokens: use.write1h,
		OutputTokens: answer.OutputTokens(), ReasoningTokens: answer.Thinking,
	}
}

// messageUsage is what a Messages call billed b reports.
func messageUsage(b Bill) anthropic.Usage {
	return anthropic.Usage{
		InputTokens:     b.InputTokens - b.CachedInputTokens - b.CacheWrite5mInputTokens - b.CacheWrite1hInputTokens,
		CacheReadTokens: b.CachedInputTokens, CacheWrite5mTokens: b.CacheWrite5mInputTokens, CacheWrite1hTokens: b.CacheWrite1hInputTokens,
		OutputTokens: b.OutputTokens, ThinkingTokens: b.ReasoningTokens,
	}
}

// makeMessage makes c's answer over its latency, pausing before each
// paced step of its stream, and emits the steps. The call is served when
// its last paced step is due: makeMessage then bills it whole, emits the
// rest whatever emit answers, and reports true. Before that, the first
// error of a pause (ctx ended) or of emit ends the call billed for its
// input and the output made so far, as Anthropic bills a call whose client
// leaves, and makeMessage reports false.
func (s *Server) makeMessage(ctx context.Context, c messageCall, emit emitter) bool {
	steps := c.answer.Steps(messageUsage(c.adm.bill))
	n := paced(steps)
	var i int
	var made Bill
	for _, st := range steps {
		if st.Paced {
			if s.sleep(ctx, part(c.latency, i, n)) != nil {
				s.leaveMessage(c.adm, made)
				return false
			}
			if i++; i == n {
				s.finish(c.adm, true)
			}
		}
		made.OutputTokens, made.ReasoningTokens = made.OutputTokens+st.Output, made.ReasoningTokens+st.Thinking
		if emit(st.Event) != nil && i < n {
			s.leaveMessage(c.adm, made)
			return false
		}
	}
	return true
}

// paced counts the paced steps; an answer has at least one.
func paced(steps []anthropic.Step) int {
	n := 0
	for _, st := range steps {
		if st.Paced {
			n++
		}
	}
	return n
}

// leaveMessage ends a Messages call whose client left after it made
// made's output, billed its input and that output.
func (s *Server) leaveMessage(adm admission, made Bill) {
	b := adm.bill
	b.OutputTokens, b.ReasoningTokens = made.OutputTokens, made.ReasoningTokens
	b = s.opts.price(b, adm.tier)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account.leave(adm.seq, adm.tier, b)
}

// countTokens handles POST /v1/messages/count_tokens: it counts the
// request under the account's limit on count_tokens requests, which its
// answer's requests headers report instead of the Messages calls', and
// then counts the prompt, free.
func (s *Server) countTokens(w http.ResponseWriter, hr *http.Request) {
	now := s.clock.Now()
	s.mu.Lock()
	wait, q := s.account.countTokens(now)
	s.mu.Unlock()
	setAnthropicLimit(w.Header(), "anthropic-ratelimit-requests", q.requestsAt(now))
	if wait > 0 {
		setRetryAfter(w.Header(), wait)
		anthropic.RateLimited(fmt.Sprintf("This request would exceed your organization's rate limit of %d token counting requests per minute. "+
			"You can see the response headers for current usage. Please try again later.", q.limitRequests)).Write(w)
		return
	}
	req, err := anthropic.ReadCount(hr, s.opts.Models, s.opts.FileTokens)
	if err != nil {
		err.Write(w)
		return
	}
	anthropic.WriteCount(w, req.Prompt.Tokens)
}

// setAnthropicQuota writes q, at now, as Anthropic's rate-limit headers:
// its requests, its input and output tokens that have a limit, and its
// tokens, input and output together, as Anthropic reports them when no
// workspace limits apply.
func setAnthropicQuota(h http.Header, q quota, now time.Time) {
	setAnthropicLimit(h, "anthropic-ratelimit-requests", q.requestsAt(now))
	setAnthropicLimit(h, "anthropic-ratelimit-input-tokens", q.input)
	setAnthropicLimit(h, "anthropic-ratelimit-output-tokens", q.output)
	setAnthropicLimit(h, "anthropic-ratelimit-tokens", q.input.plus(q.output))
}

// anthropicLimitNames name each measure of tokens in Anthropic's
// messages.
var anthropicLimitNames = [measures]string{allTokens: "tokens", inputTokens: "input tokens", outputTokens: "output tokens"}

// anthropicRefusal is the error answer to a Messages call the account did
// not admit: a 429 that says which limit it would exceed, or a 529 when too
// many calls are in flight.
func anthropicRefusal(d decision) *anthropic.Error {
	const advice = " You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."
	switch d.outcome {
	case requestsExhausted:
		return anthropic.RateLimited(fmt.Sprintf("This request would exceed your organization's rate limit of %d requests per minute.%s", d.quota.limitRequests, advice))
	case dayExhausted:
		return anthropic.RateLimited("This request would exceed your organization's rate limit of requests per day." + advice)
	case tokensExhausted, inputExhausted, outputExhausted:
		limit, name := d.quota.of(d.measure).limit, anthropicLimitNames[d.measure]
		if d.tooLarge {
			return anthropic.RateLimited(fmt.Sprintf("This request asks for %d %s, more than your organization's rate limit of %d %s per minute allows. "+
				"Please reduce the prompt length or the maximum tokens requested.", d.asked[d.measure], name, limit, name))
		}
		return anthropic.RateLimited(fmt.Sprintf("This request would exceed your organization's rate limit of %d %s per minute.%s", limit, name, advice))
	}
	return anthropic.Overloaded()
}
