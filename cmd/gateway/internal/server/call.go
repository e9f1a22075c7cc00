package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// call is one request, read and estimated: what goes to the provider and what the limits are
// asked. Once built it changes only where it goes: the offer admitted (see use), and its
// requestID, which becomes the provider's own when its answer carries one.
type call struct {
	endpoint estimate.Endpoint
	caller   *policy.Caller
	asked    *policy.Route // of the model the client named, at its pool's first provider
	// request is the body as read: the client's own model, whether it streams, and what sets
	// the completion's length (which a call too large to fit is told to change).
	request  *estimate.Request
	estimate estimate.Estimate
	// offer is where the call goes: the first of offers until it is admitted, then the one the
	// gate chose.
	offer
	// offers are the providers that may serve the call, each with the call as it goes there: the
	// pool of its model (or of the plan's cheaper fallback) that its caller's plan includes, in
	// the configuration's order.
	offers []offer
	// usageAdded is true when the gateway asked for the stream's usage chunk itself, so the
	// client, which did not ask, does not receive it.
	usageAdded bool
	// requestID names the call in the logs: the x-request-id its client was given, or its job's id.
	requestID string
	// modelSent is the model's name as the provider receives it.
	modelSent string
	// key is the caller's key, which names a background response's caller to the gateway that
	// settles it (see follower.start).
	key string
	// response is what a Responses answer said of what its provider keeps; nil until it has.
	response *estimate.Response

	// What happens to the call, for its end: the ticket of the offer admitted, how long it
	// queued, when it arrived, when it last went out to a provider (zero until it has), when its
	// provider's answer began, when its stream's first piece came, whether it has ended (see
	// Server.finish), and its trace.
	ticket     *admission.Ticket
	waited     time.Duration
	arrived    time.Time
	sent       time.Time
	answered   time.Time
	firstChunk time.Time
	// streamStarted is set once a streamed call's status and headers have gone to its client,
	// while it waited in the queue (see keepalive): the rest of its answer goes in the stream.
	streamStarted bool
	ended         atomic.Bool
	traced        *callTrace // nil when calls are not traced
}

// offer is the call as it goes to one provider: the body it reads and what the call costs there.
type offer struct {
	route *policy.Route
	body  sentBody // as sent upstream
	cost  policy.Cost
	// providerTokens is what the provider counts against its own tokens per minute when it
	// admits the call (see gatewayv1.Provider.AdmissionCount).
	providerTokens int64
}

func (s *Server) serveCall(endpoint estimate.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		traced := s.startCall(r, arrived)
		c, apiErr := s.readCall(s.policy.Load(), endpoint, r)
		c.requestID, c.arrived, c.traced = w.Header().Get(headerRequestID), arrived, traced
		c.forgetPromptTexts()
		defer s.endOnPanic(c)
		if apiErr != nil {
			setCallHeaders(w.Header(), c, nil, nil)
			s.fail(w, c, apiErr)
			return
		}
		for s.serveOffers(w, r, c) {
			s.metrics.failovers.WithLabelValues(c.provider()).Inc()
			c.offers = slices.DeleteFunc(c.offers, func(o offer) bool { return o.route == c.route })
			c.offer = c.offers[0]
		}
	}
}

// forgetPromptTexts lets go of the texts of the call's prompt, counted already: they are the
// body as it was read, or copies of its texts, which a call that sends a body of its own (with
// its cap put in, its model renamed) would hold besides it while it queues and goes out.
func (c *call) forgetPromptTexts() {
	if c.request != nil {
		c.request.Prompt.Texts = nil
	}
}

// serveOffers admits the call to one of its offers and sends it there. It reports whether the
// provider failed it before anything of its answer reached the client, with other offers left:
// the call is to be admitted again to those.
func (s *Server) serveOffers(w http.ResponseWriter, r *http.Request, c *call) bool {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	k := s.keepQueuedStreamAlive(w, c, cancel)
	t, refusal := s.admit(ctx, c, c.admission())
	k.end()
	c.admitted(t, refusal)
	setCallHeaders(w.Header(), c, t, refusal)
	switch {
	case refusal != nil && refusal.Reason == admission.Gone:
		s.finish(c, clientGone(outcomeClientClosed, "while queued", keepTicket, estimate.Usage{}))
		return false
	case refusal != nil:
		s.fail(w, c, refusalError(w.Header(), c, refusal))
		return false
	case ctx.Err() != nil:
		s.finish(c, clientGone(outcomeClientClosed, "before the call went out", withdrawTicket, estimate.Usage{}))
		return false
	}
	defer s.live.hold(c.route.Provider.Name)()
	o := s.newOutbound(c.traced.context(r.Context()), c, w.Header())
	defer o.end()
	return s.relay(w, r, o)
}

// admitted records what the gate answered the call: the ticket it goes with, or the refusal,
// and how long it queued.
func (c *call) admitted(t *admission.Ticket, refusal *admission.Refusal) {
	c.ticket = t
	switch {
	case t != nil:
		c.use(t.Route())
		c.waited = t.Waited
	case refusal != nil:
		c.waited = refusal.Waited
	}
}

// use sends the call to the offer of route.
func (c *call) use(route *policy.Route) {
	for _, o := range c.offers {
		if o.route == route {
			c.offer = o
			return
		}
	}
}

// fail answers a call with an error that ends it: refused before it had a ticket.
func (s *Server) fail(w http.ResponseWriter, c *call, e *apiError) {
	s.finish(c, answered(e, keepTicket))
	s.writeError(w, c, e)
}

// writeError answers c with e: as an HTTP error, or as an event in its stream once that has
// started (see keepalive).
func (s *Server) writeError(w http.ResponseWriter, c *call, e *apiError) {
	if c.streamStarted {
		e.writeEvent(newClientWriter(w, s.policy.Load().Config.Server.WriteTimeout.Duration, true), c)
		return
	}
	e.write(w)
}

// endOnPanic ends a call whose handler panicked, wherever it did (see endPanicked). The panic
// goes on to net/http as http.ErrAbortHandler, which cuts the connection: the client must not
// take what it received for a whole answer.
func (s *Server) endOnPanic(c *call) {
	v := recover()
	if v == nil {
		return
	}
	s.endPanicked(c, v)
	panic(http.ErrAbortHandler)
}

// endPanicked ends a call that panicked with v, unless it had ended: counted as the gateway's own
// failure, logged with its request id and stack, its slots freed and its ticket ended (charged
// its estimate if it had gone to its provider, which may bill it).
func (s *Server) endPanicked(c *call, v any) {
	te := withdrawTicket
	if !c.sent.IsZero() {
		te = settleTicket
	}
	s.finish(c, ending{outcome: outcomeInternalError, status: http.StatusInternalServerError, ticket: te,
		usage: c.estimatedUsage(), detail: fmt.Sprintf("the gateway failed the call: %v\n%s", v, debug.Stack())})
}

// setCallHeaders writes what the limits said of a call: the wait (and for a call that queued,
// the wait the door estimated), the limits left and the cheaper model it went to.
func setCallHeaders(h http.Header, c *call, t *admission.Ticket, r *admission.Refusal) {
	var waited time.Duration
	switch {
	case t != nil:
		waited = t.Waited
		setLimitHeaders(h, t.Limits)
		if t.Estimated > 0 {
			h.Set(headerQueueEstimate, strconv.FormatInt(t.Estimated.Milliseconds(), 10))
		}
	case r != nil:
		waited = r.Waited
	}
	h.Set(headerQueueWait, strconv.FormatInt(waited.Milliseconds(), 10))
	if c.degraded() {
		h.Set(headerDegradedModel, c.route.Model.Name)
	}
}

// admission is what the call asks of the limits: to go to one of its offers.
func (c *call) admission() admission.Request {
	pool := make([]admission.Choice, len(c.offers))
	for i, o := range c.offers {
		pool[i] = admission.Choice{Route: o.route, Cost: o.cost, ProviderTokens: o.providerTokens}
	}
	return admission.Request{Caller: c.caller, Route: c.route, Endpoint: planEndpoint(c.endpoint), Cost: c.cost,
		ServiceTier: c.request.ServiceTier, ProviderTokens: c.providerTokens, Pool: pool}
}

// readCall authenticates a request and reads its call. The call is never nil, so that an error
// can be counted under its tenant when it is known.
func (s *Server) readCall(p *policy.Policy, endpoint estimate.Endpoint, r *http.Request) (*call, *apiError) {
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		return &call{}, apiErr
	}
	body, apiErr := readBody(p, r)
	if apiErr != nil {
		return &call{caller: caller}, apiErr
	}
	c, refusal := s.spentBeforeCounting(r.Context(), p, caller, endpoint, body)
	if refusal != nil {
		return c, refusalError(nil, c, refusal)
	}
	if c != nil {
		c, apiErr = s.newCallOf(r.Context(), p, caller, endpoint, c.request, body)
	} else {
		c, apiErr = s.newCall(r.Context(), p, caller, endpoint, body)
	}
	c.key, _ = apiKey(r)
	return c, apiErr
}

// countsAfterCheck is the size of a body past which a call's own limits are read before its
// tokens are counted: the count costs up to about 0.13 s a MiB, a read of the store a round trip.
const countsAfterCheck = 64 << 10

// spentBeforeCounting refuses a large call, read but not counted, when one of its caller's own
// limits refuses it whatever its size (a quota or budget spent, a rate that rejects run out): a
// tenant whose every call is refused costs no count of its bodies. It returns the call as read
// and the refusal, or no refusal. The call is nil when the body is smaller than countsAfterCheck,
// does not parse or names no model the caller may use; otherwise newCallOf goes on from it
// without parsing the body again.
func (s *Server) spentBeforeCounting(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, body []byte) (*call, *admission.Refusal) {
	if len(body) < countsAfterCheck {
		return nil, nil
	}
	req, err := estimate.Parse(endpoint, body)
	if err != nil {
		return nil, nil // newCall answers it
	}
	routes, apiErr := routesOf(p, caller, req.Model)
	if apiErr != nil {
		return nil, nil
	}
	c := &call{endpoint: endpoint, caller: caller, request: req, asked: routes[0], offer: offer{route: routes[0]}}
	return c, s.gate.Spent(ctx, c.admission())
}

// identify finds whose key a request carries, or returns the error to answer.
func (s *Server) identify(p *policy.Policy, r *http.Request) (*policy.Caller, *apiError) {
	if p == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "not_ready", Message: "The gateway has no configuration yet."}
	}
	key, ok := apiKey(r)
	if !ok {
		return nil, &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "missing_api_key",
			Message: "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY' or 'x-api-key: YOUR_KEY'."}
	}
	caller := p.Caller(key)
	if caller == nil {
		return nil, &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
			Message: "Incorrect API key provided."}
	}
	return caller, nil
}

// bearerKey is the key of an "Authorization: Bearer KEY" header; the scheme is matched without
// regard to case, as HTTP's are.
func bearerKey(r *http.Request) (string, bool) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	return key, ok && strings.EqualFold(scheme, "Bearer") && key != ""
}

// readBody reads a request's body, JSON in UTF-8 (see contentTypeError), at most
// server.maxBodyBytes of it, in the time server.readTimeout allows.
func readBody(p *policy.Policy, r *http.Request) ([]byte, *apiError) {
	if apiErr := contentTypeError(r.Header); apiErr != nil {
		return nil, apiErr
	}
	limit := p.Config.Server.MaxBodyBytes
	body, err := readAtMost(http.MaxBytesReader(nil, r.Body, limit), r.ContentLength, limit+1)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("The request body is larger than %d bytes.", tooLarge.Limit)}
		}
		if isReadTimeout(err) {
			return nil, &apiError{status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout",
				Message: fmt.Sprintf("The request did not arrive within %s.", p.Config.Server.ReadTimeout.Duration)}
		}
		return nil, badRequest("unreadable_body", "The request body could not be read.")
	}
	return body, nil
}

// newCall parses a call's body, finds the providers of its model (or of the plan's cheaper
// fallback), estimates the call and makes the body to send to each: with the cap the estimate
// assumed when the client set none, in the field the provider reads, and asking a stream for its
// usage. The providers of a pool count a call alike (see gatewayv1.PoolConflict), so one estimate
// holds for all of them; each prices it at its own prices.
func (s *Server) newCall(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, body []byte) (*call, *apiError) {
	req, err := estimate.Parse(endpoint, body)
	if err != nil {
		return &call{endpoint: endpoint, caller: caller}, requestError(err)
	}
	return s.newCallOf(ctx, p, caller, endpoint, req, body)
}

// newCallOf is newCall of a body parsed already as req: a large body is parsed once, before its
// caller's own limits are read (see spentBeforeCounting).
func (s *Server) newCallOf(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, req *estimate.Request, body []byte) (*call, *apiError) {
	c, parsed := &call{endpoint: endpoint, caller: caller}, body
	routes, apiErr := routesOf(p, caller, req.Model)
	if apiErr != nil {
		return c, apiErr
	}
	if apiErr := apiMismatch(endpoint, routes[0]); apiErr != nil {
		return c, apiErr
	}
	c.asked = routes[0]
	sent, model := s.degrade(ctx, p, caller, routes, req.Model)
	c.modelSent = upstreamModel(sent[0], model)
	if body, apiErr = withUpstreamModel(body, req.Model, c.modelSent); apiErr != nil {
		return c, apiErr
	}
	c.request, c.route = req, sent[0]
	if c.estimate, apiErr = s.estimateSent(c, body); apiErr != nil {
		return c, apiErr
	}
	if body, apiErr = s.readKept(ctx, c, body); apiErr != nil {
		return c, apiErr
	}
	if req.Stream && (endpoint == estimate.Chat || endpoint == estimate.Completions) {
		if body, c.usageAdded, apiErr = withStreamUsage(body); apiErr != nil {
			return c, apiErr
		}
	}
	for _, route := range sent {
		o, apiErr := c.offerTo(route, body, sameBytes(body, parsed))
		if apiErr != nil {
			return c, apiErr
		}
		c.offers = append(c.offers, o)
	}
	c.offer = c.offers[0]
	return c, nil
}

// estimateSent estimates the call as it is sent, body being what every provider receives before
// its cap is put in: a call sent to the plan's cheaper fallback is read again, so that its images
// count by the fallback's family. No call's prompt can hold more than its model's contextWindow,
// whatever its provider keeps for it.
func (s *Server) estimateSent(c *call, body []byte) (estimate.Estimate, *apiError) {
	req, m := c.request, c.route.Model
	if c.degraded() {
		var err error
		if req, err = estimate.Parse(c.endpoint, body); err != nil {
			return estimate.Estimate{}, requestError(err)
		}
	}
	e := req.Estimate(s.counter, m.Encoding, m.DefaultMaxTokens)
	e.MaxPromptTokens = min(e.MaxPromptTokens, max(m.ContextWindow, e.PromptTokens))
	return e, nil
}

// offerTo is the call as it goes to route's provider, body being what every provider receives
// before the completion's cap is put in the field this one reads. Its estimate is priced at the
// route's prices for the service tier the call asks for, every prompt token at the input price:
// what the provider's cache will hold is not known before the call. valid is whether body is
// the one the call was parsed from, and so valid JSON.
func (c *call) offerTo(route *policy.Route, body []byte, valid bool) (offer, *apiError) {
	capped, apiErr := withCap(body, c.endpoint, c.request, route.Model, valid)
	estimated := gatewayv1.Tokens{Prompt: c.estimate.PromptTokens, Completion: c.estimate.CompletionTokens}
	return offer{
		route: route,
		body:  capped,
		cost: policy.Cost{
			Tokens:       c.estimate.Total(),
			InputTokens:  c.estimate.PromptTokens,
			OutputTokens: c.estimate.CompletionTokens,
			MicroDollars: route.Prices.CostMicros(c.request.ServiceTier, estimated),
			// Anthropic limits counting tokens apart from its Messages calls.
			OutsideProviderRequests: c.endpoint == estimate.CountTokens,
		},
		providerTokens: providerTokens(c.estimate, route.Provider.Config),
	}, apiErr
}

// providerTokens is what provider p counts against its own tokens per minute when it admits a
// call of estimate e, and holds for its minute: its prompt by characters and its cap,
// outputTokenWeight times; zero for one that counts usage alone.
func providerTokens(e estimate.Estimate, p *gatewayv1.Provider) int64 {
	if p.AdmissionCount == gatewayv1.AdmissionCountTokenizer {
		return 0
	}
	if w := p.OutputWeight(); w > 1 {
		e.CompletionTokens = min(e.CompletionTokens, math.MaxInt64/w) * w
	}
	return e.CharacterTotal()
}

// withCap returns body with the completion cap the estimate assumed in the field m's provider
// reads: the client's own cap, or m's defaultMaxTokens when the client set none, in m's
// maxTokensParam for a chat (a chat's client may name either field; TGI reads max_tokens only),
// in max_output_tokens for a response, in max_tokens for a completion. An uncapped call would let
// the provider write past the estimate, and a crowd of them pass every limit by as many times the
// difference. valid is whether body is known to be valid JSON, which is then not checked again.
func withCap(body []byte, endpoint estimate.Endpoint, req *estimate.Request, m *gatewayv1.Model, valid bool) (sentBody, *apiError) {
	if endpoint == estimate.Embeddings || endpoint == estimate.Moderations || endpoint == estimate.CountTokens {
		return sentBody{body}, nil
	}
	field := capField(endpoint, m)
	if req.MaxTokensParam == field {
		return sentBody{body}, nil
	}
	n := req.MaxTokens
	if req.MaxTokensParam == "" {
		n = m.DefaultMaxTokens
	}
	withMaxTokens := estimate.WithMaxTokens
	if valid {
		withMaxTokens = estimate.WithMaxTokensValid
	}
	capped, err := withMaxTokens(body, field, n)
	if err != nil {
		return nil, requestError(err)
	}
	return piecesOf(capped), nil
}

// capField is the field in which the provider of m reads the cap of a call to endpoint.
func capField(endpoint estimate.Endpoint, m *gatewayv1.Model) string {
	switch endpoint {
	case estimate.Chat:
		return cmp.Or(string(m.MaxTokensParam), estimate.MaxCompletionTokens)
	case estimate.Responses:
		return estimate.MaxOutputTokens
	}
	return estimate.MaxTokens
}

// routesOf is where a model's calls may go: the providers of its pool that the caller's plan
// includes, in the configuration's order.
func routesOf(p *policy.Policy, caller *policy.Caller, model string) ([]*policy.Route, *apiError) {
	pool := p.Routes(model)
	if pool == nil {
		return nil, &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found",
			Message: fmt.Sprintf("The model %q does not exist or you do not have access to it.", model)}
	}
	var routes []*policy.Route
	for _, r := range pool {
		if caller.Tenant.Uses(r.Provider.Name) {
			routes = append(routes, r)
		}
	}
	if routes == nil {
		return nil, &apiError{status: http.StatusForbidden, Type: typeInvalidRequest, Code: "provider_not_allowed",
			Message: fmt.Sprintf("Your plan does not include a provider of the model %q.", model)}
	}
	return routes, nil
}

// degrade sends a call for the plan's expensive model to its cheaper fallback while the tenant's
// budget left (spent by calls to every provider of the plan) is below the plan's threshold. It
// returns the routes and the model, as named, to send.
func (s *Server) degrade(ctx context.Context, p *policy.Policy, caller *policy.Caller, routes []*policy.Route, model string) ([]*policy.Route, string) {
	d := caller.Tenant.Config.Degrade
	if d == nil || routes[0].Model.Name != d.Model || !s.gate.BudgetBelow(ctx, caller.Tenant, d.BelowPercent) {
		return routes, model
	}
	fallback, apiErr := routesOf(p, caller, d.Fallback)
	if apiErr != nil || fallback[0].Provider.Config.API != routes[0].Provider.Config.API { // validation keeps the fallback a model of the plan's providers
		return routes, model
	}
	return fallback, d.Fallback
}

// upstreamModel is the name under which a call for model goes to route's provider: the model's
// own for an alias, which only the gateway knows, and the name as given otherwise.
func upstreamModel(route *policy.Route, model string) string {
	if slices.Contains(route.Model.Aliases, model) {
		return route.Model.Name
	}
	return model
}

// withUpstreamModel returns body with its model renamed from asked to upstream, or body itself
// when they are the same.
func withUpstreamModel(body []byte, asked, upstream string) ([]byte, *apiError) {
	if upstream == asked {
		return body, nil
	}
	renamed, err := estimate.WithModel(body, upstream)
	if err != nil {
		return nil, requestError(err)
	}
	return renamed, nil
}

// degraded reports whether the call goes to another model than the one its client asked for:
// the plan's cheaper fallback.
func (c *call) degraded() bool {
	return c.asked != nil && c.route != nil && c.route.Model.Name != c.asked.Model.Name
}

// withStreamUsage asks a stream's provider for its final usage chunk, and reports whether the
// client had not asked for it.
func withStreamUsage(body []byte) ([]byte, bool, *apiError) {
	withUsage, err := estimate.WithStreamUsage(body)
	if err != nil {
		return nil, false, requestError(err)
	}
	return withUsage, len(withUsage) != len(body) || string(withUsage) != string(body), nil
}

func requestError(err error) *apiError {
	var re *estimate.RequestError
	if errors.As(err, &re) {
		e := badRequest("invalid_request", re.Error())
		if re.Param != "" {
			e.Param = &re.Param
		}
		return e
	}
	return badRequest("invalid_request", "The request body is not valid.")
}

// estimatedUsage is the usage to settle at when the provider reported none.
func (c *call) estimatedUsage() estimate.Usage {
	return estimate.Usage{PromptTokens: c.estimate.PromptTokens, CompletionTokens: c.estimate.CompletionTokens, TotalTokens: c.estimate.Total()}
}

func (c *call) tenant() string { return tenantName(c.caller) }

// tenantName is the name of caller's tenant, or "" for no caller.
func tenantName(caller *policy.Caller) string {
	if caller == nil {
		return ""
	}
	return caller.Tenant.Name
}

func (c *call) user() string {
	if c.caller == nil {
		return ""
	}
	return c.caller.User
}

// modelAsked is the model the client named, or "" before its body was read.
func (c *call) modelAsked() string {
	if c.request == nil {
		return ""
	}
	return c.request.Model
}

func (c *call) provider() string {
	if c.route == nil {
		return ""
	}
	return c.route.Provider.Name
}

func outcomeOf(e *apiError) string {
	switch e.Code {
	case "provider_unavailable", "provider_unreachable", "provider_timeout":
		return outcomeUnreachable
	case "provider_error", "provider_auth_failed", "provider_bad_answer", codeAccountSpent:
		return outcomeProviderError
	case errOverloaded.Code:
		return outcomeOverloaded
	}
	switch e.status {
	case http.StatusTooManyRequests:
		return outcomeRefused
	case http.StatusUnauthorized:
		return outcomeUnauthorized
	case http.StatusForbidden:
		return outcomeForbidden
	case http.StatusServiceUnavailable, http.StatusInternalServerError:
		return outcomeStoreDown
	case statusClientClosed:
		return outcomeClientClosed
	}
	return outcomeBadRequest
}

// sameBytes reports whether a and b are the same bytes in memory, not only equal ones: a body
// the gateway left as it was read.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}
