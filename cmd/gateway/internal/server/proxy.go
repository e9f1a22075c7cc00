package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/upstream"
)

// maxResponseBytes bounds how much of a JSON answer the gateway reads to settle it; a larger one
// is passed on as it is and settled at the estimate.
const maxResponseBytes = 32 << 20

// settleTimeout bounds settling a call, which happens after the client has its answer.
const settleTimeout = 5 * time.Second

// proxyKey tells apart the reverse proxies: one per provider, timeout and retry settings.
type proxyKey struct {
	provider string
	timeout  time.Duration
	retry    gatewayv1.Retry
}

// proxy returns the reverse proxy for a provider's calls, one per provider, timeout and retry
// settings.
func (s *Server) proxy(p *policy.Provider) *httputil.ReverseProxy {
	cfg := p.Config
	key := proxyKey{provider: p.Name, timeout: cfg.Timeout.Duration, retry: cfg.Retry}
	if rp, ok := s.proxies.Load(key); ok {
		return rp.(*httputil.ReverseProxy)
	}
	// Each attempt has the provider's timeout to answer; a stream may take longer once it has.
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.ResponseHeaderTimeout = cfg.Timeout.Duration
	base.MaxIdleConnsPerHost = 256
	d := s.dispatcher(p.Name)
	transport := upstream.New(base, upstream.Options{
		MaxAttempts: int(cfg.Retry.MaxAttempts), BaseDelay: cfg.Retry.BaseDelay.Duration, MaxDelay: cfg.Retry.MaxDelay.Duration,
		Throttled: func(_ int, retryAfter time.Duration) { d.throttled(retryAfter) },
		Attempted: func(status int) { s.metrics.attempts.WithLabelValues(p.Name, strconv.Itoa(status)).Inc() },
	})
	rp := &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      transport,
		FlushInterval:  -1,
		BufferPool:     copyBuffers,
		ModifyResponse: s.modifyResponse,
		ErrorHandler:   s.proxyError,
	}
	actual, _ := s.proxies.LoadOrStore(key, rp)
	return actual.(*httputil.ReverseProxy)
}

// copyBuffers are the buffers the proxies copy answers through, reused rather than allocated at
// every call.
var copyBuffers = &bufferPool{}

// bufferPool is an httputil.BufferPool of 32 KiB buffers, the size the proxy would allocate.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// rewrite sends the call to its provider with the provider's key. The client's key and its
// account headers never go upstream.
func rewrite(pr *httputil.ProxyRequest) {
	c := callFrom(pr.In.Context())
	base := c.route.Provider.BaseURL
	pr.Out.URL = &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path + strings.TrimPrefix(pr.In.URL.Path, "/v1")}
	pr.Out.Host = ""
	h := pr.Out.Header
	for _, name := range []string{"Authorization", "Cookie", "Openai-Organization", "Openai-Project", "Accept-Encoding"} {
		h.Del(name)
	}
	if key := c.route.Provider.APIKey; key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	pr.Out.Body = io.NopCloser(bytes.NewReader(c.body))
	pr.Out.ContentLength = int64(len(c.body))
	pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(c.body)), nil }
}

// modifyResponse settles the call from the provider's answer: at once for JSON and errors, as
// the stream ends for SSE.
func (s *Server) modifyResponse(resp *http.Response) error {
	c := callFrom(resp.Request.Context())
	for name := range resp.Header {
		// The caller sees its own limits, set before the call, not the gateway's account.
		if strings.HasPrefix(name, "X-Ratelimit-") || strings.HasPrefix(name, "Openai-") {
			resp.Header.Del(name)
		}
	}
	status := resp.StatusCode
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		s.providerFailed(c, status)
		s.settle(c, estimate.Usage{}, false)
		return errProviderCredentials // its body may quote the gateway's own key
	case status >= 400:
		s.providerFailed(c, status)
		s.settle(c, estimate.Usage{}, false)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		resp.Body = s.newStreamBody(resp.Body, c)
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	default:
		return s.settleJSON(resp, c)
	}
	return nil
}

func (s *Server) settleJSON(resp *http.Response, c *call) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		resp.Body.Close()
		s.settle(c, c.estimatedUsage(), true) // the provider answered 200: it billed the call
		return err
	}
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeOK).Inc()
	if len(body) > maxResponseBytes {
		// Too large to settle from: passed on whole, settled at the estimate.
		s.settle(c, c.estimatedUsage(), true)
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	usage, ok := estimate.ParseUsage(body)
	if !ok {
		usage = c.estimatedUsage()
	}
	s.settle(c, usage, true)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// errProviderCredentials stands for a provider's 401 or 403: the gateway's key for it is wrong.
var errProviderCredentials = errors.New("the provider refused the gateway's credentials")

// providerFailed counts a provider's error answer; 429 and 503 say our model of its limits is wrong.
func (s *Server) providerFailed(c *call, status int) {
	s.metrics.providerErrors.WithLabelValues(c.provider(), strconv.Itoa(status)).Inc()
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeProviderError).Inc()
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		s.usage.throttled(c)
	}
}

// proxyError answers a call that got no usable answer from its provider, and refunds it unless
// the provider counted it.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	c := callFrom(r.Context())
	switch {
	case r.Context().Err() != nil:
		// The client left after the call went out: the provider has counted it against its
		// limits, so it stays charged at the estimate. Nobody reads an answer.
		s.settle(c, c.estimatedUsage(), true)
	case errors.Is(err, errProviderCredentials):
		s.log.Error("the provider refused the gateway's credentials: check its API key", "provider", c.provider())
		(&apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_auth_failed",
			Message: "The gateway's credentials for this model's provider were refused. Nothing was charged."}).write(w)
	default:
		s.settle(c, estimate.Usage{}, false)
		s.providerUnreachable(w, c, err)
	}
}

// providerUnreachable answers a call whose provider did not answer: 504 if it timed out, 502
// otherwise.
func (s *Server) providerUnreachable(w http.ResponseWriter, c *call, err error) {
	s.metrics.providerErrors.WithLabelValues(c.provider(), "0").Inc()
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeUnreachable).Inc()
	s.log.Warn("provider unreachable", "provider", c.provider(), "err", err)
	e := &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_unreachable",
		Message: "The provider of this model could not be reached. Nothing was charged."}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		e.status, e.Code = http.StatusGatewayTimeout, "provider_timeout"
		e.Message = "The provider of this model did not answer in time. Nothing was charged."
	}
	e.write(w)
}

// settle charges or refunds, on every limit the call was charged, the difference between its real
// cost and its estimate, and frees its in-flight slot. Without a real usage (ok false) the call
// is refunded whole: the provider did not serve it. It runs once per call.
func (s *Server) settle(c *call, u estimate.Usage, ok bool) {
	c.settleOnce.Do(func() {
		var actual policy.Cost
		if ok {
			actual = policy.Cost{
				Tokens:       u.PromptTokens + u.CompletionTokens,
				MicroDollars: c.route.Provider.Config.Prices.CostMicros(u.PromptTokens, u.CompletionTokens),
			}
		}
		switch {
		case c.isJob() && ok && !s.chargeJob(c):
			actual = policy.Cost{} // an earlier delivery of the job was charged: refund this one
		case c.isJob() && !ok:
			s.releaseJob(c)
		}
		delta := policy.Cost{Tokens: actual.Tokens - c.cost.Tokens, MicroDollars: actual.MicroDollars - c.cost.MicroDollars}
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		if err := c.limiter.Settle(ctx, policy.Settlement(nil, c.checks, delta, true), s.now()); err != nil {
			s.metrics.storeErrors.WithLabelValues("settle").Inc()
			s.log.Error("settle a call", "tenant", c.tenant(), "provider", c.provider(), "err", err)
		}
		s.metrics.tokens.WithLabelValues(c.tenant(), c.provider(), "estimated").Add(float64(c.cost.Tokens))
		s.metrics.tokens.WithLabelValues(c.tenant(), c.provider(), "actual").Add(float64(actual.Tokens))
		s.metrics.spend.WithLabelValues(c.tenant(), c.provider()).Add(float64(actual.MicroDollars))
		s.usage.finished(c, delta.Tokens, actual.MicroDollars, s.now())
		s.metrics.callDuration.WithLabelValues(c.provider()).Observe(s.now().Sub(c.started).Seconds())
		s.dispatcher(c.provider()).ended(ok) // what the call held is back
	})
}

// estimatedUsage is the usage to settle at when the provider reported none.
func (c *call) estimatedUsage() estimate.Usage {
	return estimate.Usage{PromptTokens: c.estimate.PromptTokens, CompletionTokens: c.estimate.CompletionTokens, TotalTokens: c.estimate.Total()}
}

// streamBody passes an SSE answer through line by line, as it arrives, watching for the final
// usage chunk; the call is settled when the stream ends or the client leaves.
type streamBody struct {
	s        *Server
	c        *call
	src      io.ReadCloser
	lines    *bufio.Reader
	usage    *estimate.StreamUsage
	pending  []byte
	finished bool
}

func (s *Server) newStreamBody(src io.ReadCloser, c *call) *streamBody {
	return &streamBody{s: s, c: c, src: src, lines: bufio.NewReader(src),
		usage: estimate.NewStreamUsage(s.counter, c.route.Model.Encoding, c.estimate.PromptTokens)}
}

func (b *streamBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		line, err := b.lines.ReadBytes('\n')
		b.pending = b.observe(line)
		if err != nil {
			if len(b.pending) > 0 {
				break
			}
			b.finish()
			return 0, err
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
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
	if b.c.usageAdded && isUsageChunk(data) {
		return nil // the client did not ask for it
	}
	return line
}

func (b *streamBody) finish() {
	if b.finished {
		return
	}
	b.finished = true
	u, _ := b.usage.Usage()
	b.s.settle(b.c, u, true)
	b.s.metrics.requests.WithLabelValues(b.c.tenant(), b.c.provider(), outcomeOK).Inc()
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
