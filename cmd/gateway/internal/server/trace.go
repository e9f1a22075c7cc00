package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
)

// A traced call is a span from its arrival to its end (Server.finish), with a child span for its
// admission, one for its wait in the queue when it queued, one for each attempt at a provider
// (retries and failovers each have their own) and one for its settlement. The spans carry the
// attributes of the OpenTelemetry GenAI conventions and Sluice's own under sluice.*, never a key,
// a prompt or an answer. Without a tracer (Options.Tracer nil) no call has a span, and each
// place that would start one costs a nil check.

// The attributes of the spans, as the OpenTelemetry semantic conventions name them.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrResponseID    = attribute.Key("gen_ai.response.id")
	attrServerAddress = attribute.Key("server.address")
	attrServerPort    = attribute.Key("server.port")
	attrErrorType     = attribute.Key("error.type")
	attrStatusCode    = attribute.Key("http.response.status_code")
)

// Sluice's own attributes.
const (
	attrTenant           = attribute.Key("sluice.tenant")
	attrUser             = attribute.Key("sluice.user")
	attrRequestID        = attribute.Key("sluice.request_id")
	attrModelSent        = attribute.Key("sluice.model_sent")
	attrQueueWait        = attribute.Key("sluice.queue.wait_ms")
	attrRefusalReason    = attribute.Key("sluice.refusal.reason")
	attrRefusalLevel     = attribute.Key("sluice.refusal.level")
	attrRefusalDimension = attribute.Key("sluice.refusal.dimension")
	attrCost             = attribute.Key("sluice.cost_usd")
	attrOutcome          = attribute.Key("sluice.outcome")
	attrAttempt          = attribute.Key("sluice.attempt")
	attrSettlement       = attribute.Key("sluice.settlement")
	attrJobID            = attribute.Key("sluice.job.id")
)

// propagator reads and writes W3C trace context: traceparent and tracestate.
var propagator = propagation.TraceContext{}

// callTrace is a traced call's span, and what it says that the call itself does not hold. A nil
// *callTrace is an untraced call's.
type callTrace struct {
	span trace.Span
	// attempts counts the attempts sent to providers, failovers included.
	attempts int
	// responseID and responseModel are what the provider's answer names itself and its model.
	responseID, responseModel string
	// noted is true once the answer was read for them.
	noted bool
}

// recording reports whether the call's span records what it is told: it is traced and sampled.
func (t *callTrace) recording() bool { return t != nil && t.span.IsRecording() }

// context is ctx carrying the call's span, the parent of its children; ctx itself when the call
// is not traced.
func (t *callTrace) context(ctx context.Context) context.Context {
	if t == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, t.span)
}

// startCall starts the span of a call to the API that arrived at arrived: in the trace its
// client's traceparent names, or a new one. It returns nil when calls are not traced.
func (s *Server) startCall(r *http.Request, arrived time.Time) *callTrace {
	if s.opts.Tracer == nil {
		return nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	_, span := s.opts.Tracer.Start(ctx, "call", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(arrived))
	return &callTrace{span: span}
}

// startJobCall starts the span of an attempt of job j, in a trace of its own linked to the span
// of the call that created the job, when that was traced. It returns nil when calls are not
// traced.
func (s *Server) startJobCall(j *jobs.Job, arrived time.Time) *callTrace {
	if s.opts.Tracer == nil {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(arrived), trace.WithNewRoot(),
		trace.WithAttributes(attrJobID.String(j.ID))}
	created := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": j.Traceparent})
	if sc := trace.SpanContextFromContext(created); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := s.opts.Tracer.Start(context.Background(), "call", opts...)
	return &callTrace{span: span}
}

// startJobCreation starts the span of a request that creates job j, in the trace its client's
// traceparent names, or a new one, and keeps the span's trace context with the job, for the spans
// of the job's attempts to link to. It returns nil when calls are not traced.
func (s *Server) startJobCreation(r *http.Request, j *jobs.Job, arrived time.Time) trace.Span {
	if s.opts.Tracer == nil {
		return nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.opts.Tracer.Start(ctx, "create job", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(arrived),
		trace.WithAttributes(attrTenant.String(j.Tenant), attrUser.String(j.User)))
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	j.Traceparent = carrier["traceparent"]
	return span
}

// endJobCreation ends the span of a request that created job j, which the jobs' store kept, or
// failed to keep with err.
func endJobCreation(span trace.Span, j *jobs.Job, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(attrErrorType.String("job_not_kept"))
	} else {
		span.SetAttributes(attrJobID.String(j.ID))
	}
	span.End()
}

// admit asks the gate to let the call go as req says. A sampled call's admission is a span of its
// own, with a child for the call's wait in the queue when it queued.
func (s *Server) admit(ctx context.Context, c *call, req admission.Request) (*admission.Ticket, *admission.Refusal) {
	if !c.traced.recording() {
		return s.gate.Admit(ctx, req)
	}
	ctx, span := s.opts.Tracer.Start(c.traced.context(ctx), "admission")
	t, refusal := s.gate.Admit(ctx, req)
	end := time.Now()
	var waited time.Duration
	switch {
	case t != nil:
		waited = t.Waited
		span.SetAttributes(attrProvider.String(t.Route().Provider.Name))
	case refusal != nil:
		waited = refusal.Waited
		attrs := refusalAttributes(refusal)
		span.SetAttributes(attrs...)
		c.traced.span.SetAttributes(attrs...)
	}
	if waited > 0 {
		_, queued := s.opts.Tracer.Start(ctx, "queue", trace.WithTimestamp(end.Add(-waited)))
		queued.SetAttributes(attrQueueWait.Int64(waited.Milliseconds()))
		queued.End(trace.WithTimestamp(end))
	}
	span.SetAttributes(attrQueueWait.Int64(waited.Milliseconds()))
	span.End(trace.WithTimestamp(end))
	return t, refusal
}

// refusalAttributes say why a call was refused: the reason and, for a limit's refusal, its level
// and dimension.
func refusalAttributes(r *admission.Refusal) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attrRefusalReason.String(r.Reason.String())}
	if r.Reason == admission.Limited || r.Reason == admission.TooLarge {
		attrs = append(attrs, attrRefusalLevel.String(r.Level.String()), attrRefusalDimension.String(dimensionText(r.Dimension)))
	}
	return attrs
}

// settle ends the call's ticket as e says and returns what it was charged in micro-dollars. A
// sampled call's settlement is a span of its own.
func (s *Server) settle(c *call, e ending) int64 {
	if !c.traced.recording() || c.ticket == nil {
		return c.endTicket(e)
	}
	_, span := s.opts.Tracer.Start(c.traced.context(context.Background()), "settlement")
	micros := c.endTicket(e)
	span.SetAttributes(attrSettlement.String(ticketEndNames[e.ticket]), attrCost.Float64(dollars(micros)))
	span.End()
	return micros
}

// ticketEndNames name what a call's end does to its ticket.
var ticketEndNames = [...]string{keepTicket: "kept", withdrawTicket: "withdrawn", refundTicket: "refunded", settleTicket: "settled",
	followTicket: "followed"}

func dollars(micros int64) float64 { return float64(micros) / 1e6 }

// endSpan ends a traced call's span as e ended the call, charged micros: named for its operation
// and model, with what it asked, where it went, what it used and cost, and its outcome.
func endSpan(c *call, e ending, micros int64) {
	if c.traced == nil {
		return
	}
	span := c.traced.span
	if !span.IsRecording() {
		span.End()
		return
	}
	op := operationName(c.endpoint)
	if model := c.modelAsked(); model != "" {
		span.SetName(op + " " + model)
	}
	span.SetAttributes(callAttributes(c, e, micros)...)
	if e.outcome != outcomeOK {
		span.SetAttributes(attrErrorType.String(e.outcome))
	}
	if failed(e) {
		span.SetStatus(codes.Error, e.outcome)
	}
	span.End()
}

// callAttributes are the attributes of a call's span at its end e, charged micros.
func callAttributes(c *call, e ending, micros int64) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attrOperation.String(operationName(c.endpoint)),
		attrTenant.String(c.tenant()),
		attrUser.String(c.user()),
		attrRequestID.String(c.requestID),
		attrOutcome.String(e.outcome),
		attrStatusCode.Int(e.status),
		attrQueueWait.Int64(c.waited.Milliseconds()),
		attrCost.Float64(dollars(micros)),
	}
	if model := c.modelAsked(); model != "" {
		attrs = append(attrs, attrRequestModel.String(model), attrMaxTokens.Int64(maxTokens(c)))
	}
	if c.route != nil {
		attrs = append(attrs, attrProvider.String(c.provider()), attrModelSent.String(c.modelSent))
	}
	if e.ticket == settleTicket {
		attrs = append(attrs, attrInputTokens.Int64(e.usage.PromptTokens), attrOutputTokens.Int64(e.usage.CompletionTokens))
	}
	return append(attrs, answerAttributes(c)...)
}

// answerAttributes name the provider's answer: its id and its model, where it named them.
func answerAttributes(c *call) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	id := c.traced.responseID
	if id == "" && c.response != nil {
		id = c.response.ID
	}
	if id != "" {
		attrs = append(attrs, attrResponseID.String(id))
	}
	if m := c.traced.responseModel; m != "" {
		attrs = append(attrs, attrResponseModel.String(m))
	}
	return attrs
}

// maxTokens is the cap on the completion the call was sent with: its client's, or its model's
// defaultMaxTokens when the client set none (see withCap).
func maxTokens(c *call) int64 {
	if c.request.MaxTokensParam == "" && c.route != nil {
		return c.route.Model.DefaultMaxTokens
	}
	return c.request.MaxTokens
}

// failed reports whether a call ended in a failure of the gateway, its store or its provider,
// rather than one of its client's or a limit's.
func failed(e ending) bool {
	switch e.outcome {
	case outcomeProviderError, outcomeUnreachable, outcomeStoreDown, outcomeInternalError:
		return true
	}
	return e.status >= 500
}

// operationName is the GenAI conventions' name of a call to endpoint: chat for a chat completion
// or a response, text_completion, embeddings, and moderations, which the conventions do not
// name.
func operationName(endpoint estimate.Endpoint) string {
	switch endpoint {
	case estimate.Chat, estimate.Responses:
		return "chat"
	case estimate.Completions:
		return "text_completion"
	}
	return string(endpoint)
}

// noteAnswer reads what a recording call's answer, or the first piece of its stream, names
// itself and its model.
func (t *callTrace) noteAnswer(data []byte) {
	if !t.recording() || t.noted {
		return
	}
	t.noted = true
	var a struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	}
	if json.Unmarshal(data, &a) == nil {
		t.responseID, t.responseModel = a.ID, a.Model
	}
}

// tracedTransport sends each attempt of a traced call under a span of its own, a child of the
// call's, and tells the provider that span's trace context in traceparent and tracestate, so that
// a provider that traces its calls joins the call's trace. A request without a span in its
// context goes as it is. It is safe for concurrent use.
type tracedTransport struct {
	base   http.RoundTripper
	tracer trace.Tracer
}

func (t *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	o, ok := req.Context().Value(outboundKey{}).(*outbound)
	if !ok || o.traced == nil {
		return t.base.RoundTrip(req)
	}
	o.traced.attempts++
	ctx, span := t.tracer.Start(req.Context(), operationName(o.endpoint)+" "+o.modelSent, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attemptAttributes(o, req)...))
	out := req.Clone(ctx)
	propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		span.SetAttributes(attrErrorType.String(transportErrorType(err)))
		span.SetStatus(codes.Error, "no answer")
		span.End()
		return nil, err
	}
	span.SetAttributes(attrStatusCode.Int(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attrErrorType.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, resp.Status)
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// attemptAttributes are the attributes of the span of o's attempt req.
func attemptAttributes(o *outbound, req *http.Request) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attrOperation.String(operationName(o.endpoint)),
		attrProvider.String(o.provider()),
		attrRequestModel.String(o.modelSent),
		attrAttempt.Int(o.traced.attempts),
		attrServerAddress.String(req.URL.Hostname()),
	}
	if port, err := strconv.Atoi(req.URL.Port()); err == nil {
		attrs = append(attrs, attrServerPort.Int(port))
	}
	return attrs
}

// transportErrorType names the class of an attempt's failure to get an answer.
func transportErrorType(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "connection"
}

// spanBody ends an attempt's span when its answer has been read to its end or closed.
type spanBody struct {
	io.ReadCloser
	span  trace.Span
	ended atomic.Bool
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *spanBody) end() {
	if b.ended.CompareAndSwap(false, true) {
		b.span.End()
	}
}

// traceAttempts is base, tracing the attempts of traced calls when the server traces calls.
func (s *Server) traceAttempts(base http.RoundTripper) http.RoundTripper {
	if s.opts.Tracer == nil {
		return base
	}
	return &tracedTransport{base: base, tracer: s.opts.Tracer}
}
