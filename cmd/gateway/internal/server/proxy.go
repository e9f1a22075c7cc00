package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/upstream"
)

// maxResponseBytes bounds how much of a JSON answer the gateway reads to settle it; a larger one
// is passed on as it is and settled at the estimate.
const maxResponseBytes = 32 << 20

// idleConnsUncapped is how many idle connections the gateway keeps to a provider that caps no
// calls in flight; the gateway's server.maxInFlight bounds how many it opens.
const idleConnsUncapped = 256

// transportKey tells apart the transports of providers' calls: one per provider, timeout, retry
// settings and cap of calls in flight, and apart again for count_tokens calls.
type transportKey struct {
	provider    string
	timeout     time.Duration
	retry       gatewayv1.Retry
	maxInFlight int64
	countTokens bool
}

// transport returns the transport of a provider's calls, one per provider, timeout, retry
// settings and cap of calls in flight. It retries, and reports the provider's throttles and
// failures to the gate.
func (s *Server) transport(p *policy.Provider) *upstream.Transport {
	return s.loadTransport(p, transportKeyOf(p))
}

// countTokensTransport returns the transport of a provider's count_tokens calls. Anthropic limits
// counting apart from its Messages calls, so a 429 of counting is no throttle of the provider.
func (s *Server) countTokensTransport(p *policy.Provider) *upstream.Transport {
	key := transportKeyOf(p)
	key.countTokens = true
	return s.loadTransport(p, key)
}

// transportKeyOf is the key of the transport of p's calls.
func transportKeyOf(p *policy.Provider) transportKey {
	cfg := p.Config
	return transportKey{provider: p.Name, timeout: cfg.Timeout.Duration, retry: cfg.Retry, maxInFlight: cfg.MaxInFlight}
}

// loadTransport returns the transport of key, made once.
func (s *Server) loadTransport(p *policy.Provider, key transportKey) *upstream.Transport {
	if t, ok := s.transports.Load(key); ok {
		return t.(*upstream.Transport)
	}
	cfg := p.Config
	var throttled func(int, time.Duration)
	if !key.countTokens {
		throttled = func(_ int, retryAfter time.Duration) { s.gate.Throttled(p.Name, retryAfter) }
	}
	t := upstream.New(s.traceAttempts(providerTransport(cfg)), upstream.Options{
		MaxAttempts: int(cfg.Retry.MaxAttempts), BaseDelay: cfg.Retry.BaseDelay.Duration, MaxDelay: cfg.Retry.MaxDelay.Duration,
		Throttled:   throttled,
		Attempted:   func(status int, err error) { s.attempted(p.Name, status, err) },
		Unreachable: s.retryElsewhere,
	})
	actual, _ := s.transports.LoadOrStore(key, t)
	return actual.(*upstream.Transport)
}

// relay sends a live call to its provider and passes the answer on to its client. A call that
// gets no usable answer is answered by the gateway, unless another provider of its pool is to
// serve it: relay then reports true, and nothing has reached its client yet. The call ends as its
// provider's answer does (see settleResponse); a client that leaves, or stops reading, before the
// answer has ended ends it sooner, charged what the provider had sent.
func (s *Server) relay(w http.ResponseWriter, in *http.Request, o *outbound) bool {
	resp, err := s.send(o, in.URL.Path, in.Header)
	if err != nil {
		if s.failedOver(o, err) {
			return true
		}
		if e := s.unanswered(o, err); e != nil {
			s.writeError(w, o.call, e)
		}
		return false
	}
	defer resp.Body.Close()
	streamed := resp.ContentLength == -1 || o.call.streamStarted
	client := newClientWriter(w, s.policy.Load().Config.Server.WriteTimeout.Duration, streamed)
	switch {
	case o.call.streamStarted && resp.StatusCode/100 != 2:
		passErrorEvent(client, resp, o.call)
	case o.call.streamStarted:
		err = passBody(client, resp)
	default:
		passHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		if streamed {
			// A stream's status and headers go at once: its first piece may be long in coming (a
			// reasoning model, a prompt being read), and a client times its first byte.
			client.flush()
		}
		err = passBody(client, resp)
	}
	switch {
	case client.err != nil || in.Context().Err() != nil:
		s.finish(o.call, o.clientLeft(client.err))
	case err != nil:
		// The answer broke off: the client must not take what it received for all of it.
		panic(http.ErrAbortHandler)
	}
	return false
}

// send sends a call to its provider, at path of the gateway's API, with the headers of in that
// forwardedHeaders allows, through the provider's retrying transport, and reads the answer as far
// as its end needs (see settleResponse).
func (s *Server) send(o *outbound, path string, in http.Header) (*http.Response, error) {
	req, err := o.body.request(o.ctx)
	if err != nil {
		return nil, err
	}
	req.URL = o.target(path) // built, not written out to be parsed again
	req.Host = req.URL.Host
	req.Header = providerHeaders(in, o.route.Provider)
	o.sent = time.Now()
	t := s.transport(o.route.Provider)
	if o.endpoint == estimate.CountTokens {
		t = s.countTokensTransport(o.route.Provider)
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	o.answered = time.Now()
	if err := s.settleResponse(resp, o); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// passHeaders adds the headers of a provider's answer that pass (see passes) to its client's.
func passHeaders(client, answer http.Header) {
	connection := answer["Connection"]
	for name, values := range answer {
		if !passes(name, connection) {
			continue
		}
		if old, ok := client[name]; ok {
			values = append(old, values...)
		}
		client[name] = values
	}
}

// passes reports whether the header name of an answer whose Connection header is connection
// reaches the client: those answerHeaders allows, unless Connection names them, as the headers
// of one connection (RFC 9110, section 7.6.1).
func passes(name string, connection []string) bool {
	return answerHeaders[name] && !names(connection, name)
}

// names reports whether a Connection header's values name the header name.
func names(connection []string, name string) bool {
	for _, v := range connection {
		for token := range strings.SplitSeq(v, ",") {
			if textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(token)) == name {
				return true
			}
		}
	}
	return false
}

// passBody copies an answer's body to its client. It returns the error that broke off the
// reading of the answer; a client that fails a write ends it too, with client.err set.
func passBody(client *clientWriter, resp *http.Response) error {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && !client.write(buf[:n]) {
			return nil
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// passErrorEvent passes a provider's error answer to c's client, whose stream has started, as the
// event its dialect's streams carry an error in: its body when that is one line of JSON, or the
// gateway's error naming its status otherwise.
func passErrorEvent(client *clientWriter, resp *http.Response, c *call) {
	body, err := readAtMost(resp.Body, resp.ContentLength, maxErrorEventBytes)
	var line bytes.Buffer
	if err == nil && json.Compact(&line, body) == nil {
		client.write(streamedError(c.endpoint, line.Bytes()))
		return
	}
	e := &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_error",
		Message: fmt.Sprintf("The provider of this model answered %d with a body that is not JSON.", resp.StatusCode)}
	e.writeEvent(client, c)
}

// maxErrorEventBytes bounds a provider's error answer passed in a stream: one event.
const maxErrorEventBytes = 64 << 10

// clientOutcome is the outcome of a call whose client failed a write with err, or left.
func clientOutcome(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return outcomeClientTooSlow
	}
	return outcomeClientClosed
}

// attempted counts an attempt to call a provider, and tells its breaker whether the provider
// served it: an answer below 500, or a 503, the provider's throttle, or a 529, Anthropic's
// capacity spent for the moment, which is counted apart too. An attempt its caller
// abandoned (the client left, or the call outlasted its timeouts) tells the breaker nothing.
func (s *Server) attempted(provider string, status int, err error) {
	s.metrics.attempts.WithLabelValues(provider, strconv.Itoa(status)).Inc()
	if status == statusOverloaded {
		s.metrics.providerOverloaded.WithLabelValues(provider).Inc()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	s.gate.Attempted(provider, err == nil && (status < 500 || status == http.StatusServiceUnavailable || status == statusOverloaded))
}

// providerTransport is the connection pool of one provider's calls. Each attempt has the
// provider's timeout to answer; a stream may take longer once it has. The pool keeps as many idle
// connections as the provider takes calls at once, so that a busy provider's calls reuse them
// instead of closing and dialling anew, and opens no more than that: the gate never lets more
// calls go, so the cap only bounds the descriptors a miscount could take.
func providerTransport(cfg *gatewayv1.Provider) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = cfg.Timeout.Duration
	idle := idleConnsUncapped
	if cfg.MaxInFlight > 0 {
		idle = int(cfg.MaxInFlight)
		t.MaxConnsPerHost = idle
	}
	// MaxIdleConns caps the idle connections of every host together: 100 in the default.
	t.MaxIdleConns, t.MaxIdleConnsPerHost = idle, idle
	return t
}

// copyBuffers are the buffers answers are passed on through, reused rather than allocated at
// every call.
var copyBuffers = &bufferPool{}

// bufferPool is a pool of 32 KiB buffers.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// forwardedHeaders are the client's headers a call takes to its provider: what answer is
// wanted, who sends it, the beta features it asks for and its trace context, as the client sent
// it when the gateway does not trace its calls, and naming the span of the call's attempt when it
// does (see tracedTransport). Every other header stays at the gateway: the client's keys
// (Authorization, Api-Key, a cookie), its account (OpenAI-Organization, OpenAI-Project), a
// connection upgrade, its Content-Type (the body goes as JSON in UTF-8, as the gateway read it)
// and whatever a provider might read that the gateway did not check.
var forwardedHeaders = []string{"Accept", "User-Agent", "Openai-Beta", "Traceparent", "Tracestate"}

// noUserAgent is the User-Agent that the transport leaves out of a call.
var noUserAgent = []string{""}

// providerHeaders are the headers of a call to provider: the client's that forwardedHeaders
// allows, the body's Content-Type, JSON, and the provider's key (for an Anthropic provider, see
// setAnthropicHeaders). A call whose client sent no
// User-Agent goes without one, not with Go's.
func providerHeaders(in http.Header, provider *policy.Provider) http.Header {
	h := make(http.Header, len(forwardedHeaders)+2)
	h["Content-Type"] = jsonContentType
	for _, name := range forwardedHeaders {
		if v := in[name]; len(v) > 0 {
			h[name] = v
		}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent
	}
	switch key := provider.APIKey; {
	case provider.Config.API == gatewayv1.APIAnthropic:
		setAnthropicHeaders(h, in, provider)
	case key == "":
	case provider.Config.Azure != nil:
		h.Set("Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// learn tells the gate what the provider's rate-limit headers say, and when the limits learned
// from them change, hands them on to be compiled into the provider's limits.
func (s *Server) learn(provider string, h http.Header) {
	now := time.Now
	if s.opts.Now != nil {
		now = s.opts.Now
	}
	if s.gate.Reported(provider, reportedLimits(h, now())) && s.opts.LimitsLearned != nil {
		s.opts.LimitsLearned()
	}
}

// Learned returns the limits learned from the providers that reported some lower than
// configured, by provider name.
func (s *Server) Learned() map[string]gatewayv1.LearnedLimits { return s.gate.Learned() }

// reportedLimits reads what an answer's headers at now say of its provider's limits per minute:
// OpenAI's x-ratelimit-limit-, -remaining- and -reset-requests and -tokens, whose reset is a
// duration, and Anthropic's anthropic-ratelimit-requests-, -input-tokens- and -output-tokens-
// limit, -remaining and -reset, whose reset is an RFC 3339 time. A header that is missing or not
// a number (or a time) says nothing.
func reportedLimits(h http.Header, now time.Time) admission.Reported {
	r := admission.Reported{Limits: gatewayv1.LearnedLimits{
		RequestsPerMinute:     cmp.Or(positiveHeader(h, requestsHeaders.limit), positiveHeader(h, anthropicRequests.limit)),
		TokensPerMinute:       positiveHeader(h, tokensHeaders.limit),
		InputTokensPerMinute:  positiveHeader(h, anthropicInputTokens.limit),
		OutputTokensPerMinute: positiveHeader(h, anthropicOutputTokens.limit),
	}}
	for _, names := range [...]dimensionHeaders{requestsHeaders, tokensHeaders, anthropicRequests, anthropicInputTokens, anthropicOutputTokens} {
		if headerValue(h, names.remaining) != "0" {
			continue
		}
		r.Exhausted = true
		r.Reset = max(r.Reset, resetAfter(headerValue(h, names.reset), now))
	}
	return r
}

// Anthropic's rate-limit headers, in their canonical form.
var (
	anthropicRequests     = anthropicHeaders("Requests")
	anthropicTokens       = anthropicHeaders("Tokens")
	anthropicInputTokens  = anthropicHeaders("Input-Tokens")
	anthropicOutputTokens = anthropicHeaders("Output-Tokens")
)

// anthropicHeaders names anthropic-ratelimit-<limit>-limit, -remaining and -reset.
func anthropicHeaders(limit string) dimensionHeaders {
	prefix := "Anthropic-Ratelimit-" + limit
	return dimensionHeaders{prefix + "-Limit", prefix + "-Remaining", prefix + "-Reset"}
}

// resetAfter is how long after now a reset header says its limit resets: a duration, as OpenAI
// writes it, or an RFC 3339 time, as Anthropic does; zero for neither, or a time past.
func resetAfter(v string, now time.Time) time.Duration {
	if d, err := time.ParseDuration(v); err == nil {
		return max(d, 0)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// positiveHeader is a header's value as a number above zero, or zero.
func positiveHeader(h http.Header, name string) int64 {
	v := headerValue(h, name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// headerValue is what h.Get returns for name, a canonical name, without canonicalizing it again.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// readAtMost reads up to n bytes of a body, a call's or an answer's, into a buffer of its
// announced length when it has one (announced is -1 when it has none), rather than one grown as
// it reads.
func readAtMost(body io.Reader, announced, n int64) ([]byte, error) {
	if announced <= 0 || announced >= n {
		return io.ReadAll(io.LimitReader(body, n))
	}
	buf := make([]byte, announced+1) // one more byte finds the end
	k, err := io.ReadFull(body, buf)
	switch {
	case int64(k) < announced: // cut off before its announced end
		return buf[:k], cmp.Or(err, io.ErrUnexpectedEOF)
	case err == io.ErrUnexpectedEOF:
		return buf[:k], nil
	case err == nil: // longer than announced
		rest, err := io.ReadAll(io.LimitReader(body, n-int64(k)))
		return append(buf, rest...), err
	}
	return buf[:k], err
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}
