package provider

import (
	"context"
	"crypto/subtle"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// Server is a simulated hosted provider: an http.Handler speaking OpenAI's
// API, or Anthropic's, under one account's limits. Create it with New. It
// is safe for concurrent use.
type Server struct {
	opts      Options
	clock     clock.PassiveClock
	sleep     func(context.Context, time.Duration) error
	mux       *http.ServeMux
	seq       atomic.Uint64
	responses *store
	runs      *runs
	cache     *cache
	// batchFiles are the account's files and batches (see batch.go).
	batchFiles *batchFiles
	mu         sync.Mutex
	account    account
}

var _ http.Handler = (*Server)(nil)

// New returns a provider with the account opts describes.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Models, opts.ReasoningModels = slices.Clone(opts.Models), slices.Clone(opts.ReasoningModels)
	s := &Server{
		opts: opts, clock: opts.Clock, sleep: opts.Sleep, mux: http.NewServeMux(),
		responses: newStore(opts.MaxStored), runs: newRuns(), cache: newCache(opts.CacheTTL, opts.MaxCachedPrefixes),
		batchFiles: newBatchFiles(),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.sleep == nil {
		s.sleep = sleep
	}
	s.account.limits = opts.limits()
	s.account.day.loc, _ = opts.dayZone() // validated
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector{s}); err != nil {
		return nil, fmt.Errorf("provider: register metrics: %w", err)
	}
	s.routes(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return s, nil
}

// limits are the account's limits; an Anthropic account's tokens are
// limited only as input and output.
func (o Options) limits() limits {
	l := limits{
		requests: o.RequestsPerMinute, perDay: o.RequestsPerDay, inFlight: o.MaxInFlight, countTokens: o.CountTokensRequestsPerMinute,
		tokens: counts{allTokens: o.TokensPerMinute, inputTokens: o.InputTokensPerMinute, outputTokens: o.OutputTokensPerMinute},
	}
	if o.API == APIAnthropic {
		l.tokens[allTokens] = 0
	}
	return l
}

// routes serve the account's API, and the counts and metrics of either.
func (s *Server) routes(metrics http.Handler) {
	if s.opts.API == APIAnthropic {
		s.anthropicRoutes()
	} else {
		s.openAIRoutes()
	}
	s.mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		openai.WriteJSON(w, http.StatusOK, s.Stats())
	})
	s.mux.Handle("GET /metrics", metrics)
}

func (s *Server) openAIRoutes() {
	for _, e := range []openai.Endpoint{openai.Chat, openai.Completions, openai.Embeddings} {
		if s.opts.AzureAPIVersion != "" {
			s.mux.Handle("POST /openai/deployments/{deployment}"+strings.TrimPrefix(e.Path(), "/v1"), s.api(s.azureCall(e)))
		} else {
			s.mux.Handle("POST "+e.Path(), s.api(s.call(e, s.opts.Models)))
		}
	}
	if s.opts.AzureAPIVersion == "" {
		s.responseRoutes()
		s.batchRoutes()
	}
	s.mux.Handle("GET /v1/models", s.api(func(w http.ResponseWriter, _ *http.Request) {
		openai.WriteModels(w, "sluice-lab", s.opts.Models)
	}))
	s.mux.Handle("/", s.api(func(w http.ResponseWriter, r *http.Request) { openai.InvalidURL(r).Write(w) }))
}

// ServeHTTP serves the API under /v1/, the counts at /stats and the
// metrics at /metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the background responses still being made, which end failed
// and unbilled, and waits for them; a background response created after
// fails at once. The server still answers everything else. Close may be
// called more than once.
func (s *Server) Close() { s.runs.close() }

// Stats returns the provider's counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := s.account.stats
	st.Received = maps.Clone(st.Received)
	s.mu.Unlock()
	st.Responses.Stored = int64(s.responses.len())
	return st
}

// api wraps an API handler: it counts the request, every answer carries
// the rate-limit headers, and only callers with the key get past.
func (s *Server) api(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setQuota(w.Header(), s.receive(r, s.clock.Now()))
		if !s.authorized(r) {
			openai.InvalidAPIKey().Write(w)
			return
		}
		h(w, r)
	})
}

// receive counts the API request r, received at now, and returns the quota
// its answer reports unless a decision changes it.
func (s *Server) receive(r *http.Request, now time.Time) quota {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account.received(r.Pattern)
	return s.account.quotaAt(now)
}

// authorized reports whether the caller sent the account's key: as a bearer
// token, or for an Azure account in its api-key header. An Anthropic account
// also takes it in its x-api-key header, where Anthropic's API takes it;
// Anthropic's Go SDK sends it as a bearer token.
func (s *Server) authorized(r *http.Request) bool {
	switch {
	case s.opts.APIKey == "":
		return true
	case s.opts.AzureAPIVersion != "":
		return same(r.Header.Get("Api-Key"), s.opts.APIKey)
	case s.opts.API == APIAnthropic && r.Header.Get("X-Api-Key") != "":
		return same(r.Header.Get("X-Api-Key"), s.opts.APIKey)
	}
	return same(r.Header.Get("Authorization"), "Bearer "+s.opts.APIKey)
}

// same reports whether got is want, in constant time.
func same(got, want string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 }

// azureCall handles a call to e at an Azure deployment: one of the account's,
// with its api-version, is served as the OpenAI path would serve it.
func (s *Server) azureCall(e openai.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("api-version"); v != s.opts.AzureAPIVersion {
			openai.InvalidRequest("api-version", "Unsupported api-version %q: this resource takes %s.", v, s.opts.AzureAPIVersion).Write(w)
			return
		}
		if !s.opts.azureServes(r.PathValue("deployment")) {
			openai.InvalidURL(r).Write(w) // Azure answers 404 DeploymentNotFound
			return
		}
		s.call(e, s.opts.Models)(w, r) // the deployment serves the call, whatever model its body names
	}
}

// call handles a call to e for one of models: it reads the request, admits
// it or answers why not, and answers it after the call's latency.
func (s *Server) call(e openai.Endpoint, models []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := openai.Read(r, e, s.opts.DefaultMaxTokens, models)
		if err != nil {
			err.Write(w)
			return
		}
		adm, err := s.admit(w, s.opts.chatAsk(req))
		if err != nil {
			err.Write(w)
			return
		}
		rep := reply(req, adm.bill, s.seq.Add(1), s.clock.Now().Unix())
		latency := jitter(s.opts.Latency, s.opts.LatencyStdDev, rand.NormFloat64())
		if req.Stream {
			s.stream(r.Context(), w, req, rep, latency, adm)
		} else {
			s.answer(r.Context(), w, req, rep, latency, adm)
		}
	}
}

// admission is an admitted call: where the minute counts it, the tier
// that serves it, and its bill if it is served whole.
type admission struct {
	seq  uint64
	tier string
	bill Bill
}

// admit finds what the cache holds of a's prompt and admits it as the
// account decides, writing the rate-limit headers, or returns the refusal
// to answer. An admitted prompt's prefixes are cached.
func (s *Server) admit(w http.ResponseWriter, a ask) (admission, *openai.Error) {
	now := s.clock.Now()
	b := a.whole
	b.CachedInputTokens = s.cache.lookup(now, a.model, a.text)
	d := s.decide(now, b, a.cap)
	setQuota(w.Header(), d.quota)
	if d.outcome != admitted {
		setRetry(w.Header(), d.retryAfter)
		return admission{}, refusal(d, a.model)
	}
	s.cache.record(now, a.model, a.text)
	return admission{seq: d.seq, tier: a.tier, bill: s.opts.price(b, a.tier)}, nil
}

// decide has the account decide at now about a call billed b if it is
// served whole, its cached tokens known, and capped at limit.
func (s *Server) decide(now time.Time, b Bill, limit int64) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.account.admit(now, s.opts.charge(b, limit))
}

// reply is the answer to req, billed b: the answer's text, and for a chat
// its tier and its usage by class. It finishes for "length" when it
// reached the cap the request set.
func reply(req openai.Request, b Bill, seq uint64, created int64) openai.Reply {
	rep := openai.NewReply(req, seq, created)
	rep.Text = answerText(b)
	rep.Usage = openai.Usage{PromptTokens: b.InputTokens, CompletionTokens: b.OutputTokens, TotalTokens: b.InputTokens + b.OutputTokens}
	rep.FinishReason = "stop"
	if req.Capped && b.OutputTokens == req.CompletionTokens {
		rep.FinishReason = "length"
	}
	if req.Endpoint == openai.Chat {
		rep.ServiceTier = req.ServiceTier
		rep.Usage.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: b.CachedInputTokens, AudioTokens: b.AudioInputTokens}
		rep.Usage.CompletionTokensDetails = &openai.CompletionTokensDetails{ReasoningTokens: b.ReasoningTokens, AudioTokens: b.AudioOutputTokens}
	}
	return rep
}

// answer answers an admitted call as JSON after d, or ends it unserved if
// the client leaves first. The call ends before the answer is written, so
// a client that has read its answer finds the call in Stats.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, req openai.Request, rep openai.Reply, d time.Duration, adm admission) {
	err := s.sleep(ctx, d)
	s.finish(adm, err == nil)
	if err == nil {
		openai.WriteReply(w, req.Endpoint, rep)
	}
}

// stream streams an admitted call, spreading d over its chunks of text. The
// call is served, and ends, when its last chunk is due; it ends unserved if
// the client leaves before.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req openai.Request, rep openai.Reply, d time.Duration, adm admission) {
	served := false
	pause := func(i, n int) error {
		if err := s.sleep(ctx, part(d, i, n)); err != nil {
			return err
		}
		if i == n-1 {
			served = true
			s.finish(adm, served)
		}
		return nil
	}
	if openai.WriteStream(w, req, rep, pause) != nil && !served {
		s.finish(adm, served)
	}
}

// finish frees the call's slot, counts what it made in the minute, and
// bills it if it was served.
func (s *Server) finish(adm admission, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account.finish(adm.seq, adm.tier, served, adm.bill)
}

// jitter is a call's latency: mean plus sd times z, a standard normal
// draw, never below zero.
func jitter(mean, sd time.Duration, z float64) time.Duration {
	return max(mean+time.Duration(float64(sd)*z), 0)
}

// part is the share of d to wait before the i-th of n chunks; the n shares
// add up to d exactly.
func part(d time.Duration, i, n int) time.Duration {
	return d*time.Duration(i+1)/time.Duration(n) - d*time.Duration(i)/time.Duration(n)
}

// sleep waits for d on a real timer, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refusal is the error answer to a call for model that the account did
// not admit.
func refusal(d decision, model string) *openai.Error {
	switch d.outcome {
	case requestsExhausted:
		q := d.quota
		return rateLimited("requests", fmt.Sprintf("Rate limit reached for %s in organization org-lab on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.",
			model, q.limitRequests, q.limitRequests-q.remainingRequests, resetString(d.retryAfter)))
	case dayExhausted:
		return rateLimited("requests_per_day", fmt.Sprintf("Rate limit reached for %s in organization org-lab on requests per day (RPD). Please try again in %s.",
			model, resetString(d.retryAfter)))
	case tokensExhausted, inputExhausted, outputExhausted:
		return tokenRefusal(d, model)
	}
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: "overloaded_error", Code: "overloaded",
		Message: "The server is overloaded: too many calls in flight. Please try again shortly."}
}

// limitNames name each measure's limit: the error type of its 429, and
// its name in the message.
var limitNames = [measures]struct{ typ, name string }{
	allTokens:    {"tokens", "tokens per min (TPM)"},
	inputTokens:  {"input_tokens", "input tokens per min (ITPM)"},
	outputTokens: {"output_tokens", "output tokens per min (OTPM)"},
}

// tokenRefusal is the 429 for a call refused for the tokens of
// d.measure.
func tokenRefusal(d decision, model string) *openai.Error {
	k, q := d.measure, d.quota.of(d.measure)
	n := limitNames[k]
	if d.tooLarge {
		return rateLimited(n.typ, fmt.Sprintf("Request too large for %s in organization org-lab on %s: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.",
			model, n.name, q.limit, d.asked[k]))
	}
	return rateLimited(n.typ, fmt.Sprintf("Rate limit reached for %s in organization org-lab on %s: Limit %d, Used %d, Requested %d. Please try again in %s.",
		model, n.name, q.limit, q.limit-q.remaining, d.asked[k], resetString(d.retryAfter)))
}

func rateLimited(typ, msg string) *openai.Error {
	return &openai.Error{Status: http.StatusTooManyRequests, Type: typ, Code: "rate_limit_exceeded", Message: msg}
}

// setQuota writes q as OpenAI's rate-limit headers, and the input and
// output tokens that have a limit as Anthropic's.
func setQuota(h http.Header, q quota) {
	h.Set("x-ratelimit-limit-requests", strconv.FormatInt(q.limitRequests, 10))
	h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(q.remainingRequests, 10))
	h.Set("x-ratelimit-reset-requests", resetString(q.reset))
	h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(q.limitTokens, 10))
	h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(q.remainingTokens, 10))
	h.Set("x-ratelimit-reset-tokens", resetString(q.reset))
	setAnthropicLimit(h, "anthropic-ratelimit-input-tokens", q.input)
	setAnthropicLimit(h, "anthropic-ratelimit-output-tokens", q.output)
}

// setAnthropicLimit writes q as Anthropic's headers named from prefix, its
// reset an RFC 3339 time rounded up to the second; without a limit, it
// removes them.
func setAnthropicLimit(h http.Header, prefix string, q tokenQuota) {
	if q.limit == 0 {
		for _, suffix := range []string{"-limit", "-remaining", "-reset"} {
			h.Del(prefix + suffix)
		}
		return
	}
	h.Set(prefix+"-limit", strconv.FormatInt(q.limit, 10))
	h.Set(prefix+"-remaining", strconv.FormatInt(q.remaining, 10))
	h.Set(prefix+"-reset", rfc3339Up(q.resetAt))
}

// rfc3339Up writes t in RFC 3339, in UTC, rounded up to the second.
func rfc3339Up(t time.Time) string {
	return t.Add(time.Second - time.Nanosecond).Truncate(time.Second).UTC().Format(time.RFC3339)
}

// setRetry writes retry-after (whole seconds) and retry-after-ms, both
// rounded up; nothing for a zero d.
func setRetry(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	setRetryAfter(h, d)
	h.Set("retry-after-ms", strconv.FormatInt(ceilDiv(d, time.Millisecond), 10))
}

// setRetryAfter writes retry-after, whole seconds rounded up; nothing for a
// zero d.
func setRetryAfter(h http.Header, d time.Duration) {
	if d > 0 {
		h.Set("retry-after", strconv.FormatInt(ceilDiv(d, time.Second), 10))
	}
}

// resetString writes d as OpenAI does, a Go duration rounded up to the
// millisecond: "1m0s", "1.5s", "20ms", "0s".
func resetString(d time.Duration) string {
	return (time.Duration(ceilDiv(max(d, 0), time.Millisecond)) * time.Millisecond).String()
}

// ceilDiv is d / unit rounded up, for a d of zero or more.
func ceilDiv(d, unit time.Duration) int64 { return int64((d + unit - 1) / unit) }
