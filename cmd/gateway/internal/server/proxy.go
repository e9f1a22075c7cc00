package server

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
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
// settings and cap of calls in flight.
type transportKey struct {
	provider    string
	timeout     time.Duration
	retry       gatewayv1.Retry
	maxInFlight int64
}

// transport returns the transport of a provider's calls, one per provider, timeout, retry
// settings and cap of calls in flight. It retries, and reports the provider's throttles and
// failures to the gate.
func (s *Server) transport(p *policy.Provider) *upstream.Transport {
	cfg := p.Config
	key := transportKey{provider: p.Name, timeout: cfg.Timeout.Duration, retry: cfg.Retry, maxInFlight: cfg.MaxInFlight}
	if t, ok := s.transports.Load(key); ok {
		return t.(*upstream.Transport)
	}
	t := upstream.New(providerTransport(cfg), upstream.Options{
		MaxAttempts: int(cfg.Retry.MaxAttempts), BaseDelay: cfg.Retry.BaseDelay.Duration, MaxDelay: cfg.Retry.MaxDelay.Duration,
		Throttled:   func(_ int, retryAfter time.Duration) { s.gate.Throttled(p.Name, retryAfter) },
		Attempted:   func(status int, err error) { s.attempted(p.Name, status, err) },
		Unreachable: s.retryElsewhere,
	})
	actual, _ := s.transports.LoadOrStore(key, t)
	return actual.(*upstream.Transport)
}

// relay sends a live call to its provider and passes the answer on to its client. A call that
// gets no usable answer is answered by the gateway, unless another provider of its pool is to
// serve it (see Server.failedOver): nothing has reached its client yet.
func (s *Server) relay(w http.ResponseWriter, in *http.Request, o *outbound) {
	resp, err := s.send(o, in.URL.Path, in.Header)
	if err != nil {
		if s.failedOver(o, err) {
			return
		}
		if e := s.unanswered(o, err); e != nil {
			e.write(w)
		}
		return
	}
	defer resp.Body.Close()
	passHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if resp.ContentLength == -1 {
		// A stream's status and headers go at once: its first piece may be long in coming (a
		// reasoning model, a prompt being read), and a client times its first byte.
		http.NewResponseController(w).Flush()
	}
	if err := passBody(w, resp); err != nil {
		// The answer broke off: the client must not take what it received for all of it.
		panic(http.ErrAbortHandler)
	}
}

// send sends a call to its provider, at path of the gateway's API, with the headers of in that
// forwardedHeaders allows, through the provider's retrying transport, and settles the answer
// (see settleResponse).
func (s *Server) send(o *outbound, path string, in http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(o.ctx, http.MethodPost, "", bytes.NewReader(o.body))
	if err != nil {
		return nil, err
	}
	req.URL = o.target(path) // built, not written out to be parsed again
	req.Host = req.URL.Host
	req.Header = providerHeaders(in, o.call)
	resp, err := s.transport(o.route.Provider).RoundTrip(req)
	if err != nil {
		return nil, err
	}
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

// passBody copies an answer's body to its client; a stream, or any answer of unknown length,
// is flushed at every piece, as it arrives. It returns the error that broke off the reading of
// the answer; a client that stops reading ends it too, without one: nobody is left to tell.
func passBody(w http.ResponseWriter, resp *http.Response) error {
	var flusher *http.ResponseController
	if resp.ContentLength == -1 {
		flusher = http.NewResponseController(w)
	}
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if flusher != nil && flusher.Flush() != nil {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// attempted counts an attempt to call a provider, and tells its breaker whether the provider
// served it: an answer below 500, or a 503, the provider's throttle. An attempt its caller
// abandoned (the client left, or the call outlasted its timeouts) tells the breaker nothing.
func (s *Server) attempted(provider string, status int, err error) {
	s.metrics.attempts.WithLabelValues(provider, strconv.Itoa(status)).Inc()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	s.gate.Attempted(provider, err == nil && (status < 500 || status == http.StatusServiceUnavailable))
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
// wanted, who sends it, the beta features it asks for and its trace. Every other header stays at
// the gateway: the client's keys (Authorization, Api-Key, a cookie), its account
// (OpenAI-Organization, OpenAI-Project), a connection upgrade, its Content-Type (the body goes as
// JSON in UTF-8, as the gateway read it) and whatever a provider might read that the gateway did
// not check.
var forwardedHeaders = []string{"Accept", "User-Agent", "Openai-Beta", "Traceparent", "Tracestate"}

// noUserAgent is the User-Agent that the transport leaves out of a call.
var noUserAgent = []string{""}

// providerHeaders are the headers of a call to its provider: the client's that forwardedHeaders
// allows, the body's Content-Type, JSON, and the provider's key. A call whose client sent no
// User-Agent goes without one, not with Go's.
func providerHeaders(in http.Header, c *call) http.Header {
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
	switch key := c.route.Provider.APIKey; {
	case key == "":
	case c.route.Provider.Config.Azure != nil:
		h.Set("Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// settleResponse ends the call's ticket from the provider's answer: at once for JSON and errors,
// as the stream ends for SSE.
func (s *Server) settleResponse(resp *http.Response, o *outbound) error {
	s.learn(o.call.route.Provider.Name, resp.Header)
	status := resp.StatusCode
	if status >= 400 && upstream.Retryable(resp, nil) && o.canFailOver() {
		s.metrics.providerErrors.WithLabelValues(o.provider(), strconv.Itoa(status)).Inc()
		o.ticket.Refund()
		return errFailOver // another provider of the pool serves the call, under the client's request id
	}
	if id := resp.Header.Get(headerRequestID); o.answer != nil && id != "" {
		o.answer.Del(headerRequestID) // the provider's own id names the call where it was served
		o.requestID = id
	}
	resp.Body = o.watchStall(resp.Body)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		s.providerFailed(o.call, status)
		o.ticket.Refund()
		return errProviderCredentials // its body may quote the gateway's own key
	case status >= 400:
		s.providerFailed(o.call, status)
		o.ticket.Refund()
		ownRetryAfter(o.answer, resp, o.route.Provider.Config) // every 429 and 503 says when to come back
		if status >= 500 {
			s.replaceServerError(resp, o)
		}
	case isEventStream(resp.Header):
		resp.Body = s.newStreamBody(resp.Body, o)
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	default:
		return s.settleJSON(resp, o)
	}
	return nil
}

// replaceServerError puts the gateway's own error in place of a provider's 5xx answer, whose
// body is the provider's internals, not the client's to read; its status and Retry-After stay.
// A 4xx, which tells the client what is wrong with its call, passes as it is.
func (s *Server) replaceServerError(resp *http.Response, o *outbound) {
	s.log.Warn("the provider failed the call", "provider", o.provider(), "status", resp.StatusCode, "request_id", o.requestID)
	resp.Body.Close()
	e := &apiError{status: resp.StatusCode, Type: typeServer, Code: "provider_error",
		Message: fmt.Sprintf("The provider of this model failed the call (%d). Nothing was charged.", resp.StatusCode)}
	body := e.body()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Encoding")
}

// learn tells the gate what the provider's rate-limit headers say, and when the limits learned
// from them change, hands them on to be compiled into the provider's limits.
func (s *Server) learn(provider string, h http.Header) {
	if s.gate.Reported(provider, reportedLimits(h)) && s.opts.LimitsLearned != nil {
		s.opts.LimitsLearned()
	}
}

// Learned returns the limits learned from the providers that reported some lower than
// configured, by provider name.
func (s *Server) Learned() map[string]gatewayv1.LearnedLimits { return s.gate.Learned() }

// reportedLimits reads OpenAI's x-ratelimit-limit-, -remaining- and -reset-requests and
// -tokens. A header that is missing or not a number says nothing.
func reportedLimits(h http.Header) admission.Reported {
	var r admission.Reported
	r.Limits.RequestsPerMinute = positiveHeader(h, requestsHeaders.limit)
	r.Limits.TokensPerMinute = positiveHeader(h, tokensHeaders.limit)
	for _, names := range []dimensionHeaders{requestsHeaders, tokensHeaders} {
		if headerValue(h, names.remaining) != "0" {
			continue
		}
		r.Exhausted = true
		if reset, err := time.ParseDuration(headerValue(h, names.reset)); err == nil {
			r.Reset = max(r.Reset, reset)
		}
	}
	return r
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

func (s *Server) settleJSON(resp *http.Response, o *outbound) error {
	body, err := readAtMost(resp.Body, resp.ContentLength, maxResponseBytes+1)
	if err != nil {
		resp.Body.Close()
		o.ticket.Settle(o.estimatedUsage()) // the provider answered 200: it billed the call
		return err
	}
	if len(body) > maxResponseBytes {
		// Too large to settle from: passed on whole, settled at the estimate.
		s.metrics.requests.WithLabelValues(o.tenant(), o.provider(), outcomeOK).Inc()
		o.ticket.Settle(o.estimatedUsage())
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	usage, ok := estimate.ParseUsage(body)
	if !ok {
		usage = o.estimatedUsage()
		if !json.Valid(body) {
			// A 200 the client cannot parse is no answer: it gets an OpenAI error in its place.
			// The provider answered 200, so it billed the call: it stays charged at its estimate.
			o.ticket.Settle(usage)
			return errProviderGarbled
		}
	}
	s.metrics.requests.WithLabelValues(o.tenant(), o.provider(), outcomeOK).Inc()
	o.ticket.Settle(usage)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
	return nil
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

// errProviderCredentials stands for a provider's 401 or 403: the gateway's key for it is wrong.
var errProviderCredentials = errors.New("the provider refused the gateway's credentials")

// errProviderGarbled stands for a provider's 200 whose body is not JSON.
var errProviderGarbled = errors.New("the provider answered 200 with a body that is not JSON")

// providerFailed counts a provider's error answer.
func (s *Server) providerFailed(c *call, status int) {
	s.metrics.providerErrors.WithLabelValues(c.provider(), strconv.Itoa(status)).Inc()
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeProviderError).Inc()
}

// errFailOver stands for a provider's answer that is worth trying again at another provider of
// the call's pool, and is not passed on: a 429 or 5xx.
var errFailOver = errors.New("the provider failed the call; another of its model's pool is to serve it")

// failedOver reports whether a call that got no usable answer goes to another provider of its
// pool: its provider answered a 429 or a 5xx (given back already), or did not answer at all (its
// ticket given back now). A call already charged, or refused for the gateway's credentials or
// its provider's slowness, does not.
func (s *Server) failedOver(o *outbound, err error) bool {
	switch {
	case errors.Is(err, errFailOver):
	case errors.Is(err, errProviderCredentials) || errors.Is(err, errProviderGarbled) || !o.canFailOver():
		return false
	case !o.ticket.Refund(): // settled: the provider had begun to answer
		return false
	default:
		s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
	}
	s.log.Info("the provider failed the call before it answered; sending it to another of the model's pool", "provider", o.provider(), "err", err, "request_id", o.requestID)
	o.failedOver = true
	return true
}

// unanswered ends the ticket of a call that got no usable answer, refunding it unless the
// provider counted it, and returns the error to answer, or nil when nobody reads one.
func (s *Server) unanswered(o *outbound, err error) *apiError {
	switch {
	case o.tooSlow() != nil:
		return s.providerTooSlow(o)
	case o.ctx.Err() != nil:
		// The client left after the call went out: the provider has counted it against its
		// limits, so it stays charged at the estimate. Nobody reads an answer.
		o.ticket.Settle(o.estimatedUsage())
		s.clientLeft(o.call, "before the provider answered")
		return nil
	case errors.Is(err, errProviderCredentials):
		s.log.Error("the provider refused the gateway's credentials: check its API key", "provider", o.provider(), "request_id", o.requestID)
		return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_auth_failed",
			Message: "The gateway's credentials for this model's provider were refused. Nothing was charged."}
	case errors.Is(err, errProviderGarbled):
		s.providerFailed(o.call, http.StatusOK)
		s.log.Warn("the provider answered 200 with a body that is not JSON", "provider", o.provider(), "request_id", o.requestID)
		return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_bad_answer",
			Message: "The provider of this model answered with a body that is not JSON." + chargedAnswer(o)}
	}
	return s.providerUnreachable(o, err)
}

// chargedAnswer ends the ticket of a call that failed, refunding it unless its answer had begun
// and was charged already, and tells the client which.
func chargedAnswer(o *outbound) string {
	if o.ticket.Refund() {
		return " Nothing was charged."
	}
	return " It was charged at its estimate: the provider had begun to answer, and bills it."
}

// providerTooSlow is the answer to a call the gateway cut off for its provider's slowness.
func (s *Server) providerTooSlow(o *outbound) *apiError {
	s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
	s.metrics.requests.WithLabelValues(o.tenant(), o.provider(), outcomeUnreachable).Inc()
	cause := o.tooSlow()
	s.log.Warn("provider too slow", "provider", o.provider(), "err", cause, "request_id", o.requestID)
	return &apiError{status: http.StatusGatewayTimeout, Type: typeServer, Code: "provider_timeout",
		Message: "The provider of this model did not finish its answer in time: " + cause.Error() + "." + chargedAnswer(o)}
}

// providerUnreachable is the answer to a call whose provider did not answer, or broke off its
// answer: 504 if it timed out, 502 otherwise.
func (s *Server) providerUnreachable(o *outbound, err error) *apiError {
	s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
	s.metrics.requests.WithLabelValues(o.tenant(), o.provider(), outcomeUnreachable).Inc()
	s.log.Warn("provider unreachable", "provider", o.provider(), "err", err, "request_id", o.requestID)
	e := &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_unreachable",
		Message: "The provider of this model could not be reached."}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		e.status, e.Code = http.StatusGatewayTimeout, "provider_timeout"
		e.Message = "The provider of this model did not answer in time."
	}
	e.Message += chargedAnswer(o)
	return e
}

// The bounds on reading a stream. A line that fits in streamBufferSize is passed on whole, so
// that a usage chunk the client did not ask for can be held back; a longer one is passed on as
// it arrives, and read for usage only up to maxObservedLine.
const (
	streamBufferSize = 16 << 10
	maxObservedLine  = 1 << 20
)

// streamBody passes an SSE answer through line by line, as it arrives, watching for the final
// usage chunk; the call's ticket is settled when the stream ends or the client leaves. A stream
// the provider breaks off, or that the gateway cuts for its provider's slowness, ends cleanly
// with an error event, which the OpenAI SDKs raise as an error.
type streamBody struct {
	s       *Server
	o       *outbound
	src     io.ReadCloser
	lines   *bufio.Reader
	usage   *estimate.StreamUsage
	pending []byte
	err     error  // ends the stream once pending is sent
	long    []byte // the start of a line longer than the buffer, up to maxObservedLine
	broken  bool   // the provider broke the stream off, or the gateway cut it for its slowness
}

func (s *Server) newStreamBody(src io.ReadCloser, o *outbound) *streamBody {
	return &streamBody{s: s, o: o, src: src, lines: bufio.NewReaderSize(src, streamBufferSize),
		usage: estimate.NewStreamUsage(s.counter, o.route.Model.Encoding, o.estimate.PromptTokens)}
}

func (b *streamBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			b.finish()
			return 0, b.err
		}
		b.pending, b.err = b.next()
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// next reads the stream's next line, or the next piece of a long one, and returns what the
// client receives of it and the error that ends the stream after it.
func (b *streamBody) next() ([]byte, error) {
	piece, err := b.lines.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		b.keepLong(piece)
		return piece, nil
	}
	out := piece
	if b.long != nil {
		b.keepLong(piece)
		b.observe(b.long) // too long to be the usage chunk: passed on whatever it holds
		b.long = nil
	} else {
		out = b.observe(piece)
	}
	if err == nil {
		return out, nil
	}
	return b.ending(out, err)
}

// keepLong keeps the start of a long line to read its usage, up to maxObservedLine.
func (b *streamBody) keepLong(piece []byte) {
	if b.long == nil {
		b.long = make([]byte, 0, 2*streamBufferSize)
	}
	b.long = append(b.long, piece[:min(len(piece), maxObservedLine-len(b.long))]...)
}

// ending is what the client receives at the stream's end: its last bytes and, when the provider
// broke the stream off or the gateway cut it, an error event, then a clean end. A client that
// left receives nothing more.
func (b *streamBody) ending(last []byte, err error) ([]byte, error) {
	if err == io.EOF || (b.o.ctx.Err() != nil && b.o.tooSlow() == nil) {
		return last, err
	}
	e := &apiError{Type: typeServer, Code: "provider_stream_broken",
		Message: "The provider's stream broke off before its end; the usage received so far was charged."}
	if cause := b.o.tooSlow(); cause != nil {
		e.Code, e.Message = "provider_timeout", "The provider of this model did not finish its answer in time: "+cause.Error()+"."
	}
	b.broken = true
	b.s.log.Warn("stream ended early", "provider", b.o.provider(), "err", err, "code", e.Code, "request_id", b.o.requestID)
	b.s.metrics.providerErrors.WithLabelValues(b.o.provider(), "0").Inc()
	event, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	return slices.Concat(last, []byte("\n\ndata: "), event, []byte("\n\n")), io.EOF
}

// observe feeds a data line to the usage counter and returns what the client receives of it.
func (b *streamBody) observe(line []byte) []byte {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
	if !ok {
		return line
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return line
	}
	b.usage.Observe(data)
	if b.o.usageAdded && isUsageChunk(data) {
		return nil // the client did not ask for it
	}
	return line
}

// finish settles the stream's call from the usage it saw, once, and counts how it ended. A
// stream whose reader stopped before its end (an end of file, or the error event that ends it)
// lost its client: the proxy reads on while it can write.
func (b *streamBody) finish() {
	u, _ := b.usage.Usage()
	switch {
	case !b.o.ticket.Settle(u):
	case b.err != io.EOF:
		b.s.clientLeft(b.o.call, "mid-stream")
	case b.broken:
		b.s.metrics.requests.WithLabelValues(b.o.tenant(), b.o.provider(), outcomeProviderError).Inc()
	default:
		b.s.metrics.requests.WithLabelValues(b.o.tenant(), b.o.provider(), outcomeOK).Inc()
	}
}

func (b *streamBody) Close() error {
	b.finish()
	return b.src.Close()
}

// isUsageChunk reports whether a stream chunk is the final one that only carries usage.
func isUsageChunk(data []byte) bool {
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	return json.Unmarshal(data, &chunk) == nil && len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}
