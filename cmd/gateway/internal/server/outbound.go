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
	errProviderStalled = errors.New("the provider sent nothing for longer than its stallTimeout")
	errCallTimeout     = errors.New("the call lasted longer than its provider's callTimeout")
)

// outbound is a call on its way to its provider, with the ticket that lets it go. Its context
// ends when the client leaves, when the call outlasts its provider's callTimeout, or when the
// provider's answer, once begun, stalls for its stallTimeout; context.Cause tells which.
type outbound struct {
	*call
	ticket *admission.Ticket
	// answer is the header of the client's answer; nil for a job's call, which has no client.
	answer http.Header

	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline *time.Timer // ends ctx at callTimeout
	stall    *time.Timer // ends ctx when the answer stalls; nil until the answer begins
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
	return o
}

func outboundFrom(ctx context.Context) *outbound { return ctx.Value(outboundKey{}).(*outbound) }

// end stops the call's timers and ends its context. It runs in the goroutine that read the
// answer, as watchStall does.
func (o *outbound) end() {
	o.deadline.Stop()
	if o.stall != nil {
		o.stall.Stop()
	}
	o.cancel(context.Canceled)
}

// tooSlow returns why the gateway ended the call for its provider's slowness, or nil when it
// did not.
func (o *outbound) tooSlow() error {
	if cause := context.Cause(o.ctx); errors.Is(cause, errCallTimeout) || errors.Is(cause, errProviderStalled) {
		return cause
	}
	return nil
}

// watchStall arms the stall timeout on an answer that has begun: every byte the provider sends
// puts it back.
func (o *outbound) watchStall(body io.ReadCloser) io.ReadCloser {
	o.stall = time.AfterFunc(o.route.Provider.Config.StallTimeout.Duration, func() { o.cancel(errProviderStalled) })
	return &stallBody{ReadCloser: body, o: o}
}

// stallBody is an answer's body that re-arms its call's stall timeout at every read that brings
// bytes.
type stallBody struct {
	io.ReadCloser
	o *outbound
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.o.stall.Reset(b.o.route.Provider.Config.StallTimeout.Duration)
	}
	return n, err
}
