package server

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// inFlight counts the calls a gateway holds, in all and by tenant, to refuse those past
// server.maxInFlight or past their tenant's share of it (see share). The zero value holds none;
// it is safe for concurrent use.
type inFlight struct {
	mu       sync.Mutex
	n        atomic.Int64     // written under mu; read without it by the metrics
	byTenant map[string]int64 // the tenants holding calls, by name; "" those with no known key
}

// tryEnter counts one more call of tenant and reports true, unless limit calls are held already
// or the tenant holds its share of them (see share); tenants is how many the configuration has.
func (f *inFlight) tryEnter(tenant string, limit int64, tenants int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, held := f.n.Load(), f.byTenant[tenant]
	if n >= limit || held >= share(limit, n-held, tenants) {
		return false
	}
	if f.byTenant == nil {
		f.byTenant = map[string]int64{}
	}
	f.byTenant[tenant] = held + 1
	f.n.Store(n + 1)
	return true
}

// leave counts a call of tenant that tryEnter let in as done.
func (f *inFlight) leave(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n.Add(-1)
	if held := f.byTenant[tenant] - 1; held > 0 {
		f.byTenant[tenant] = held
	} else {
		delete(f.byTenant, tenant)
	}
}

// A tenant's share of server.maxInFlight is shareNum/shareDen of what the other tenants leave.
const shareNum, shareDen = 7, 8

// share is the most calls one tenant may hold on a gateway of limit calls whose other tenants
// hold others: seven eighths of what they leave, and at least one. Alone, a tenant holds 7/8 of
// limit; the next to come finds the rest, a third 7/8 of what the first two leave, and as calls
// end each tenant's share moves towards an equal part. A configuration of one tenant leaves it
// all.
//
// With limit 16, a tenant alone may hold 14, and leaves 2: a second tenant that comes may hold 1
// of them (7/8 of 2, at least 1), and a third the last. Once the first holds 8 and the third
// none, the second may hold 7 (7/8 of 8), and the first no more than it holds.
func share(limit, others int64, tenants int) int64 {
	left := limit - others
	if tenants <= 1 {
		return left
	}
	return max(left*shareNum/shareDen, 1)
}

// errOverloaded is the answer to a call past server.maxInFlight, or past its tenant's share of
// it. Another replica, or this one a moment later, can take it.
var errOverloaded = &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "server_overloaded",
	Message: "The gateway is holding as many calls as it can. Try again shortly."}

// limitInFlight answers 503 with Retry-After to a call past server.maxInFlight, or past its
// tenant's share of it, before its body is read, so that a gateway past its capacity refuses the
// excess cheaply and keeps serving the rest, and no tenant holds it all. The tenant is known
// from the request's key, its headers alone.
func (s *Server) limitInFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.policy.Load()
		if p == nil { // no configuration yet: the call is refused anyway
			next.ServeHTTP(w, r)
			return
		}
		caller := callerOf(p, r)
		tenant := tenantName(caller)
		if !s.inFlight.tryEnter(tenant, int64(p.Config.Server.MaxInFlight), len(p.Tenants())) {
			s.metrics.overloaded.WithLabelValues(tenant).Inc()
			s.finish(&call{caller: caller, requestID: w.Header().Get(headerRequestID), arrived: time.Now()}, answered(errOverloaded, keepTicket))
			errOverloaded.write(w)
			return
		}
		defer s.inFlight.leave(tenant)
		next.ServeHTTP(w, r)
	})
}

// callerOf is the caller whose key the request carries, or nil for none known.
func callerOf(p *policy.Policy, r *http.Request) *policy.Caller {
	key, ok := apiKey(r)
	if !ok {
		return nil
	}
	return p.Caller(key)
}

// isReadTimeout reports whether err is the connection's read deadline passing: the client did
// not send its request within server.readTimeout.
func isReadTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
