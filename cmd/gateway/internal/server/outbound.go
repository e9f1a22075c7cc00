package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
)

// The reasons the gateway ends a call its provider is too slow to finish.
var (
	errProviderIdle = errors.New("the provider sent nothing for longer than its idleTimeout")
	errCallTimeout  = errors.New("the call lasted longer than its provider's callTimeout")
)

// outbound is a call on its way to its provider, with the ticket that lets it go. Its context
// ends when the client leaves, when the call outlasts its provider's callTimeout, or when the
// provider's answer, once begun, stalls for its idleTimeout; context.Cause tells which.
type outbound struct {
	*call
	ticket *admission.Ticket
	// answer is the header of the client's answer; nil for a job's call, which has no client.
	answer http.Header

	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline *time.Timer // ends ctx at callTimeout
	idle     *time.Timer // ends ctx when the answer stalls; armed when the answer begins
}

type outboundKey struct{}

// newOutbound starts the call's clock: from now it has its provider's callTimeout. Call end when
// the call is over, answer read, to stop its timers.
func newOutbound(ctx context.Context, c *call, t *admission.Ticket, answer http.Header) *outbound {
	o := &outbound{call: c, ticket: t, answer: answer}
	ctx, o.cancel = context.WithCancelCause(ctx)
	o.ctx = context.WithValue(ctx, outboundKey{}, o)
	cfg := c.route.Provider.Config
	o.deadline = time.AfterFunc(cfg.CallTimeout.Duration, func() { o.cancel(errCallTimeout) })
	o.idle = time.AfterFunc(cfg.IdleTimeout.Duration, func() { o.cancel(errProviderIdle) })
	o.idle.Stop()
	return o
}

func outboundFrom(ctx context.Context) *outbound { return ctx.Value(outboundKey{}).(*outbound) }

// end stops the call's timers and ends its context.
func (o *outbound) end() {
	o.deadline.Stop()
	o.idle.Stop()
	o.cancel(context.Canceled)
}

// tooSlow returns why the gateway ended the call for its provider's slowness, or nil when it
// did not.
func (o *outbound) tooSlow() error {
	if cause := context.Cause(o.ctx); errors.Is(cause, errCallTimeout) || errors.Is(cause, errProviderIdle) {
		return cause
	}
	return nil
}

// watchIdle arms the idle timeout on an answer that has begun: every byte the provider sends
// puts it back.
func (o *outbound) watchIdle(body io.ReadCloser) io.ReadCloser {
	o.idle.Reset(o.route.Provider.Config.IdleTimeout.Duration)
	return &idleBody{ReadCloser: body, o: o}
}

// idleBody is an answer's body that re-arms its call's idle timeout at every read that brings
// bytes.
type idleBody struct {
	io.ReadCloser
	o *outbound
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.o.idle.Reset(b.o.route.Provider.Config.IdleTimeout.Duration)
	}
	return n, err
}
