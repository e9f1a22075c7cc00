package server

import (
	"crypto/subtle"
	"net/http"
)

// adminOnly serves next only to callers that send the admin token as "Authorization: Bearer
// TOKEN", when Options.AdminToken is set. A missing or wrong token is answered 401, and a token
// that cannot be read 503, so that no caller is let in while it is unknown.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	if s.opts.AdminToken == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.checkAdminToken(r); e != nil {
			if e.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
			}
			e.write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkAdminToken compares the request's bearer token with the admin token in constant time.
func (s *Server) checkAdminToken(r *http.Request) *apiError {
	want, err := s.opts.AdminToken()
	if err != nil {
		s.log.Error("cannot read the admin token; the admin endpoints refuse every caller until it can be read", "err", err)
		return &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "admin_token_unavailable",
			Message: "The gateway cannot read its admin token."}
	}
	got, ok := bearerKey(r)
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_admin_token",
			Message: "The admin endpoints want the gateway's admin token, sent as 'Authorization: Bearer TOKEN'."}
	}
	return nil
}
