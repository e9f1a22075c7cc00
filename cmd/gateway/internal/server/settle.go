package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/upstream"
)

// settleResponse reads a provider's answer as far as its call's end needs, and ends the call
// when the answer tells how: at once for an error or a JSON answer, at the stream's end for SSE
// (see streamBody). It returns an error, and ends nothing, for an answer that does not pass on:
// one another provider of the pool is to serve (errFailOver), or one the gateway answers in its
// place (see Server.unanswered).
func (s *Server) settleResponse(resp *http.Response, o *outbound) error {
	status := resp.StatusCode
	// A 529 is Anthropic's capacity, not the account's limits; a count_tokens answer's headers
	// are the limits of counting, which Anthropic keeps apart from its Messages calls'.
	if status != statusOverloaded && o.endpoint != estimate.CountTokens {
		s.learn(o.route.Provider.Name, resp.Header)
	}
	if status >= 400 {
		s.metrics.providerErrors.WithLabelValues(o.provider(), strconv.Itoa(status)).Inc()
		if upstream.Retryable(resp, nil) && o.canFailOver() {
			return errFailOver // another provider of the pool serves the call, under the client's request id
		}
		if accountSpent(resp, o.route.Provider) {
			return s.accountSpentError(o)
		}
	}
	if id := cmp.Or(resp.Header.Get(headerRequestID), resp.Header.Get(headerAnthropicRequestID)); o.answer != nil && id != "" {
		o.answer.Del(headerRequestID) // the provider's own id names the call where it was served
		o.requestID = id
	}
	resp.Body = o.watchStall(resp.Body)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return errProviderCredentials // its body may quote the gateway's own key
	case status >= 400:
		s.passError(resp, o)
	case isEventStream(resp.Header):
		o.stream = s.newStreamBody(resp.Body, o)
		resp.Body = o.stream
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	default:
		return s.settleJSON(resp, o)
	}
	return nil
}

// passError ends a call its provider answered with an error, which passes on to its client:
// refunded, with the gateway's own Retry-After on every 429 and 503, and x-should-retry: false on a 4xx no retry
// can change. A 4xx other than the provider's throttle is the call's own fault, counted
// bad_request; a 5xx's body, the provider's internals, becomes the gateway's own error.
func (s *Server) passError(resp *http.Response, o *outbound) {
	status := resp.StatusCode
	e := ending{outcome: outcomeProviderError, status: status, ticket: refundTicket, detail: fmt.Sprintf("the provider answered %d", status)}
	switch {
	case status >= 500:
		replaceServerError(resp, o.errorBody)
	case status == http.StatusTooManyRequests:
	default:
		e.outcome = outcomeBadRequest
		if status != http.StatusRequestTimeout && status != http.StatusConflict && o.answer != nil {
			o.answer.Set("X-Should-Retry", "false")
		}
	}
	ownRetryAfter(o.answer, resp, o.route.Provider.Config) // every 429 and 503 says when to come back
	s.finish(o.call, e)
}

// replaceServerError puts the gateway's own error, as bodyOf writes it, in place of a
// provider's 5xx answer, whose body is the provider's internals, not the client's to read; its
// status stays.
func replaceServerError(resp *http.Response, bodyOf func(*apiError) []byte) {
	resp.Body.Close()
	e := &apiError{status: resp.StatusCode, Type: typeServer, Code: "provider_error",
		Message: fmt.Sprintf("The provider of this model failed the call (%d). Nothing was charged.", resp.StatusCode)}
	body := bodyOf(e)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Encoding")
}

// settleJSON reads a JSON answer whole and ends its call, charged the usage the answer reports,
// or its estimate when it reports none. An answer larger than maxResponseBytes is passed on as
// it arrives, charged its estimate. One cut off, or that is not JSON, never reaches the client,
// but its provider bills it: settleJSON returns it as a billedError.
func (s *Server) settleJSON(resp *http.Response, o *outbound) error {
	body, err := readAtMost(resp.Body, resp.ContentLength, maxResponseBytes+1)
	if err != nil {
		return billedError{err}
	}
	if len(body) > maxResponseBytes {
		s.finish(o.call, servedAtEstimate(o.call, "the answer was too large to read for its usage"))
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	o.traced.noteAnswer(body)
	usage, ok := estimate.ParseUsage(body)
	if o.endpoint == estimate.Responses {
		if r, isResponse := estimate.ParseResponse(body); isResponse {
			o.response = &r
		}
	}
	switch {
	case !ok && !json.Valid(body):
		return billedError{errProviderGarbled} // a 200 the client cannot parse is no answer
	case o.runsInBackground() && !o.response.Final():
		s.finish(o.call, following(o.call, http.StatusOK, "the provider answered before the response ran"))
	case !ok:
		s.finish(o.call, servedAtEstimate(o.call, "the answer reported no usage"))
	default:
		s.finish(o.call, served(usage))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
	return nil
}

// servedAtEstimate is the end of a call its provider served without saying what it used, and why.
func servedAtEstimate(c *call, why string) ending {
	e := served(c.estimatedUsage())
	e.detail = why + "; it was charged its estimate"
	return e
}

// billedError is the error of an answer that began with 200 and did not pass on: its provider
// bills the call, which stays charged its estimate.
type billedError struct{ error }

func (e billedError) Unwrap() error { return e.error }

// errProviderCredentials stands for a provider's 401 or 403: the gateway's key for it is wrong.
var errProviderCredentials = errors.New("the provider refused the gateway's credentials: check its API key")

// errProviderGarbled stands for a provider's 200 whose body is not JSON.
var errProviderGarbled = errors.New("the provider answered 200 with a body that is not JSON")

// errFailOver stands for a provider's answer that is worth trying again at another provider of
// the call's pool, and is not passed on: a 429 or 5xx.
var errFailOver = errors.New("the provider failed the call; another of its model's pool is to serve it")

// failedOver reports whether a call that got no usable answer goes to another provider of its
// pool: its provider answered a 429 or a 5xx, or did not answer at all. Its ticket is given back
// here, and the call goes on. A call its provider billed, or that failed for the gateway's
// credentials or its provider's slowness, does not.
func (s *Server) failedOver(o *outbound, err error) bool {
	var billed billedError
	switch {
	case errors.Is(err, errFailOver):
	case errors.Is(err, errProviderCredentials) || errors.As(err, &billed) || !o.canFailOver():
		return false
	default:
		s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
	}
	o.ticket.Refund()
	s.log.Info("the provider failed the call before it answered; sending it to another of the model's pool", "provider", o.provider(), "err", err, "request_id", o.requestID)
	return true
}

// unanswered ends a call that got no usable answer, refunded unless its provider billed it, and
// returns the error to answer it with, or nil when nobody reads one.
func (s *Server) unanswered(o *outbound, err error) *apiError {
	if o.ctx.Err() != nil && o.tooSlow() == nil {
		// The client left after the call went out: the provider has counted it against its
		// limits, so it stays charged at the estimate. Nobody reads an answer.
		s.finish(o.call, clientGone(outcomeClientClosed, "before the provider answered", settleTicket, o.estimatedUsage()))
		return nil
	}
	e := s.unansweredError(o, err)
	end := answered(e, refundTicket)
	end.detail = err.Error()
	if errors.As(err, new(billedError)) {
		end.ticket, end.usage = settleTicket, o.estimatedUsage()
		e.Message += " It was charged at its estimate: the provider had begun to answer, and bills it."
	} else {
		e.Message += " Nothing was charged."
	}
	s.finish(o.call, end)
	return e
}

// unansweredError is the error that answers a call that got no usable answer for err: 504 if its
// provider was too slow, 502 if it refused the gateway's credentials, answered garbled or could
// not be reached.
func (s *Server) unansweredError(o *outbound, err error) *apiError {
	switch {
	case o.tooSlow() != nil:
		s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
		return &apiError{status: http.StatusGatewayTimeout, Type: typeServer, Code: "provider_timeout",
			Message: "The provider of this model did not finish its answer in time: " + o.tooSlow().Error() + "."}
	case errors.Is(err, errProviderCredentials):
		return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_auth_failed",
			Message: "The gateway's credentials for this model's provider were refused."}
	case errors.Is(err, errAccountSpent):
		return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: codeAccountSpent,
			Message: "The gateway's account with this model's provider has spent its credit or reached its spend limit."}
	case errors.Is(err, errProviderGarbled):
		s.metrics.providerErrors.WithLabelValues(o.provider(), strconv.Itoa(http.StatusOK)).Inc()
		return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_bad_answer",
			Message: "The provider of this model answered with a body that is not JSON."}
	}
	s.metrics.providerErrors.WithLabelValues(o.provider(), "0").Inc()
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return &apiError{status: http.StatusGatewayTimeout, Type: typeServer, Code: "provider_timeout",
			Message: "The provider of this model did not answer in time."}
	}
	return &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_unreachable",
		Message: "The provider of this model could not be reached."}
}
