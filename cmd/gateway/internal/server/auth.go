package server

import (
	"net/http"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// authenticate finds whose key a request carries: its caller, or the error to answer. A request
// whose Authorization is ambiguous (see ambiguousAuthorization) is refused.
func (s *Server) authenticate(p *policy.Policy, r *http.Request) (*policy.Caller, *apiError) {
	apiErr := ambiguousAuthorization(r)
	var caller *policy.Caller
	if apiErr == nil {
		caller, apiErr = s.identify(p, r)
	}
	return caller, apiErr
}

// ambiguousAuthorization refuses a request with two Authorization headers, or one folded over
// several lines (obs-fold, which Go's server joins into one): a proxy in front of the gateway
// that reads another of them, or only the first line, would disagree with it about who calls.
func ambiguousAuthorization(r *http.Request) *apiError {
	if len(r.Header["Authorization"]) < 2 && !foldedAuthorization(r.Context()) {
		return nil
	}
	return &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "ambiguous_api_key",
		Message: "The request carries more than one Authorization header, or one folded over several lines. Send one 'Authorization: Bearer YOUR_KEY' header, on one line."}
}
