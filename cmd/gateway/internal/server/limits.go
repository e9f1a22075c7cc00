package server

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
)

// inFlight counts the calls a gateway holds, to refuse those past server.maxInFlight. The zero
// value holds none; it is safe for concurrent use.
type inFlight struct{ n atomic.Int64 }

// tryEnter counts one more call and reports true, unless limit are held already.
func (f *inFlight) tryEnter(limit int64) bool {
	for {
		n := f.n.Load()
		if n >= limit {
			return false
		}
		if f.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// leave counts a call that tryEnter let in as done.
func (f *inFlight) leave() { f.n.Add(-1) }

// errOverloaded is the answer to a call past server.maxInFlight. Another replica, or this one
// a moment later, can take it.
var errOverloaded = &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "server_overloaded",
	Message: "The gateway is holding as many calls as it can. Try again shortly."}

// limitInFlight answers 503 with Retry-After to a call past server.maxInFlight, before its body
// is read, so that a gateway past its capacity refuses the excess cheaply and keeps serving the
// rest.
func (s *Server) limitInFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.policy.Load()
		if p == nil { // no configuration yet: the call is refused anyway
			next.ServeHTTP(w, r)
			return
		}
		if !s.inFlight.tryEnter(int64(p.Config.Server.MaxInFlight)) {
			s.metrics.overloaded.Inc()
			errOverloaded.write(w)
			return
		}
		defer s.inFlight.leave()
		next.ServeHTTP(w, r)
	})
}

// isReadTimeout reports whether err is the connection's read deadline passing: the client did
// not send its request within server.readTimeout.
func isReadTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
