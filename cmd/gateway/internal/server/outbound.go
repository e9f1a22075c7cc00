package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/balance"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// The reasons the gateway ends a call its provider is too slow to finish.
var (
	errProviderStalled = errors.New("the provider sent nothing for longer than its stallTimeout")
	errCallTimeout     = errors.New("the call lasted longer than its provider's callTimeout")
)

// outbound is an admitted call on its way to its provider. Its context ends when the client
// leaves, when the call outlasts its provider's callTimeout, or when the provider's answer, once
// begun, stalls for its stallTimeout; context.Cause tells which.
type outbound struct {
	*call
	// answer is the header of the client's answer; nil for a job's call, which has no client.
	answer http.Header
	// lease is the endpoint the call goes to; nil when its provider has none (see Server.pickEndpoint).
	lease *balance.Lease
	// stream reads the answer when it streams; nil until then.
	stream *streamBody

	ctx      context.Context
	cancel   context.CancelCauseFunc
	timeouts timeouts // end ctx at callTimeout, or when the answer stalls
}

type outboundKey struct{}

// newOutbound picks where the call goes and starts its clock: from now it has its provider's
// callTimeout. Call end when the call is over, answer read, to stop its timers and free its
// endpoint.
func (s *Server) newOutbound(ctx context.Context, c *call, answer http.Header) *outbound {
	o := &outbound{call: c, answer: answer, lease: s.pickEndpoint(c.route.Provider)}
	ctx, o.cancel = context.WithCancelCause(ctx)
	o.ctx = context.WithValue(ctx, outboundKey{}, o)
	cfg := c.route.Provider.Config
	o.timeouts.start(cfg.CallTimeout.Duration, cfg.StallTimeout.Duration, o.cancel)
	return o
}

// pickEndpoint leases the least busy of the provider's endpoints as the configuration in force
// now has them: a call that waited while a self-hosted provider had no ready Pod goes to the
// Pods ready when it leaves the queue. A provider gone from the configuration keeps the
// endpoints the call was admitted with.
func (s *Server) pickEndpoint(p *policy.Provider) *balance.Lease {
	return s.endpoints.Pick(s.currentEndpoints(p))
}

// currentEndpoints are the provider's endpoints in the configuration in force, or the ones it
// was admitted with when it is gone from it.
func (s *Server) currentEndpoints(p *policy.Provider) []*url.URL {
	if now := s.policy.Load().Provider(p.Name); now != nil && len(now.Endpoints) > 0 {
		return now.Endpoints
	}
	return p.Endpoints
}

// retryElsewhere points a call's retry, after its endpoint could not be reached, at another of
// its provider's endpoints when it has another: a Pod that has gone, or is going, refuses
// connections until the gateways' configuration drops it.
func (s *Server) retryElsewhere(retry *http.Request) {
	o, ok := retry.Context().Value(outboundKey{}).(*outbound)
	if !ok {
		return // a call on a kept object, which goes to the provider's first endpoint
	}
	o.lease = s.endpoints.PickOther(s.currentEndpoints(o.route.Provider), o.lease)
	if o.lease != nil {
		retry.URL.Scheme, retry.URL.Host, retry.Host = o.lease.URL.Scheme, o.lease.URL.Host, o.lease.URL.Host
	}
}

// target is the URL at the call's endpoint for a path of the gateway's API: the path after /v1
// appended to the endpoint, or for an Azure provider to the deployment of the call's model, with
// the provider's api-version. A call with no endpoint gets a URL with no host, which its
// transport refuses: the provider is unreachable.
func (o *outbound) target(path string) *url.URL {
	if o.lease == nil {
		return &url.URL{Scheme: "http", Path: path}
	}
	base := o.lease.URL
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path}
	if azure := o.route.Provider.Config.Azure; azure != nil {
		u.Path += "/openai/deployments/" + url.PathEscape(azure.Deployment(o.route.Model.Name))
		u.RawQuery = url.Values{"api-version": {azure.APIVersion}}.Encode()
	}
	u.Path += strings.TrimPrefix(path, "/v1")
	return u
}

func outboundFrom(ctx context.Context) *outbound { return ctx.Value(outboundKey{}).(*outbound) }

// end stops the call's timers and ends its context. It runs in the goroutine that read the
// answer, as watchStall does.
func (o *outbound) end() {
	o.lease.Release()
	o.timeouts.stop()
	o.cancel(context.Canceled)
}

// canFailOver reports whether the call may go to another provider of its pool if this one fails
// it: a live call (a job is attempted again instead) with another provider to go to, whose client
// is still there and which the gateway has not cut off for slowness.
func (o *outbound) canFailOver() bool {
	return o.answer != nil && len(o.offers) > 1 && o.ctx.Err() == nil
}

// usageSoFar is what the call has used by now, by what its answer has shown: a stream's usage so
// far, or the estimate.
func (o *outbound) usageSoFar() estimate.Usage {
	if o.stream != nil {
		return o.stream.soFar()
	}
	return o.estimatedUsage()
}

// clientLeft is the end of a call whose client left, or failed a write with err, before its
// answer ended: charged what its provider had sent by then, or, for a background response, which
// its provider runs on, followed to its end.
func (o *outbound) clientLeft(err error) ending {
	if o.stream != nil {
		o.stream.noteResponse()
	}
	if o.runsInBackground() {
		return following(o.call, statusClientClosed, "the client left "+o.where())
	}
	return clientGone(clientOutcome(err), o.where(), settleTicket, o.usageSoFar())
}

// where names the part of its answer a call is in, for its log: "mid-stream" or "mid-answer".
func (o *outbound) where() string {
	if o.stream != nil {
		return "mid-stream"
	}
	return "mid-answer"
}

// tooSlow returns why the gateway ended the call for its provider's slowness, or nil when it
// did not.
func (o *outbound) tooSlow() error {
	if cause := context.Cause(o.ctx); errors.Is(cause, errCallTimeout) || errors.Is(cause, errProviderStalled) {
		return cause
	}
	return nil
}

// watchStall arms the stall timeout on an answer that has begun: every read that brings bytes
// puts it back. The answer's last byte also frees the call's endpoint, as the gate frees its
// slot when it settles the answer, so that the next call is never sent to a Pod that, by the
// count, is still busy with this one.
func (o *outbound) watchStall(body io.ReadCloser) io.ReadCloser {
	o.timeouts.answerBegun()
	return &stallBody{ReadCloser: body, o: o}
}

// stallBody is an answer's body that tells its call's timeouts of every read that brings
// bytes, and frees the call's endpoint at its end.
type stallBody struct {
	io.ReadCloser
	o *outbound
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.o.timeouts.read()
	}
	if err == io.EOF {
		b.o.lease.Release()
	}
	return n, err
}

// timeouts ends a call that outlasts its callTimeout, or whose answer, once begun, brings nothing
// for its stallTimeout. It keeps one timer: a read only notes its time, and the timer, when it
// fires, ends the call or waits for what is left. Its methods are safe for concurrent use.
type timeouts struct {
	started  time.Time
	call     time.Duration // callTimeout
	stall    time.Duration // stallTimeout
	end      func(cause error)
	lastRead atomic.Int64 // when the answer last brought bytes, since started; -1 before it begins
	mu       sync.Mutex   // guards the timer's arming
	timer    *time.Timer
	stopped  bool
}

// start starts the clock: from now, the call has its callTimeout, and end is called with the
// cause of the timeout that passes first.
func (t *timeouts) start(call, stall time.Duration, end func(cause error)) {
	t.started, t.call, t.stall, t.end = time.Now(), call, stall, end
	t.lastRead.Store(-1)
	t.timer = time.AfterFunc(call, t.fire)
}

// answerBegun starts the stall timeout.
func (t *timeouts) answerBegun() {
	t.read()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.arm() // a callTimeout that has passed has fired already
}

// read notes a read of the answer that brought bytes.
func (t *timeouts) read() { t.lastRead.Store(int64(time.Since(t.started))) }

// fire ends the call if a timeout has passed, and otherwise waits for the next.
func (t *timeouts) fire() {
	t.mu.Lock()
	cause := t.arm()
	t.mu.Unlock()
	if cause != nil {
		t.end(cause)
	}
}

// arm sets the timer for the next timeout, or returns its cause when it has passed. The caller
// holds t.mu.
func (t *timeouts) arm() error {
	if t.stopped {
		return nil
	}
	due, cause := t.call, errCallTimeout
	if last := t.lastRead.Load(); last >= 0 && time.Duration(last)+t.stall < due {
		due, cause = time.Duration(last)+t.stall, errProviderStalled
	}
	if wait := due - time.Since(t.started); wait > 0 {
		t.timer.Reset(wait)
		return nil
	}
	return cause
}

// stop stops the clock for good.
func (t *timeouts) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}
