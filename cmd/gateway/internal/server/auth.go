package server

import (
	"hash/maphash"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// authenticate finds whose key a request carries: its caller, or the error to answer. A request
// whose Authorization is ambiguous (see ambiguousAuthorization) is refused. A client address
// past its allowance of failed authentications (see guesses) is answered 429 before its key is
// checked, so that a guesser learns nothing of the keys it sends until the allowance is back.
func (s *Server) authenticate(p *policy.Policy, r *http.Request) (*policy.Caller, *apiError) {
	addr, now := clientAddress(r), s.now()
	if wait := s.guesses.wait(addr, now); wait > 0 {
		return nil, tooManyFailures(wait)
	}
	apiErr := ambiguousAuthorization(r)
	var caller *policy.Caller
	if apiErr == nil {
		caller, apiErr = s.identify(p, r)
	}
	if apiErr != nil && apiErr.status == http.StatusUnauthorized {
		s.guesses.fail(addr, now)
	}
	return caller, apiErr
}

// ambiguousAuthorization refuses a request with two Authorization headers or two x-api-key
// headers, one of them folded over several lines (obs-fold, which Go's server joins into one),
// or both with different keys: a proxy in front of the gateway, or a provider, that reads
// another of them, or only the first line, would disagree with it about who calls.
func ambiguousAuthorization(r *http.Request) *apiError {
	h := r.Header
	if len(h["Authorization"]) < 2 && len(h[headerXAPIKey]) < 2 && !foldedAuthorization(r.Context()) && !twoKeys(h) {
		return nil
	}
	return &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "ambiguous_api_key",
		Message: "The request carries more than one Authorization or x-api-key header, one folded over several lines, or both with different keys. Send one key, in one 'Authorization: Bearer YOUR_KEY' or 'x-api-key: YOUR_KEY' header, on one line."}
}

// twoKeys reports whether a request carries both an Authorization and an x-api-key header that
// do not name one key.
func twoKeys(h http.Header) bool {
	authorization, xAPIKey := headerValue(h, "Authorization"), headerValue(h, headerXAPIKey)
	if authorization == "" || xAPIKey == "" {
		return false
	}
	scheme, key, _ := strings.Cut(authorization, " ")
	return !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) != strings.TrimSpace(xAPIKey)
}

// apiKey is the key a request carries: in "Authorization: Bearer KEY", as OpenAI's SDKs send
// it, else in x-api-key, as Anthropic's do. A request with both names one key in them (see
// ambiguousAuthorization).
func apiKey(r *http.Request) (string, bool) {
	if key, ok := bearerKey(r); ok {
		return key, true
	}
	key := strings.TrimSpace(headerValue(r.Header, headerXAPIKey))
	return key, key != ""
}

// tooManyFailures is the answer to a request from a client address past its allowance of failed
// authentications, which is back after wait.
func tooManyFailures(wait time.Duration) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "too_many_failed_authentications", retryAfter: wait,
		Message: "Too many requests with a missing or wrong API key came from your address. Check your key, and try again after Retry-After."}
}

// now is the server's time.
func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// clientAddress is the address a request's failed authentications count against: the peer's IP
// (X-Forwarded-For is not trusted: any client may send it), or for IPv6 its /64, which one host
// usually holds whole.
func clientAddress(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return prefix.String()
	}
	return addr.String()
}

// The allowance of failed authentications of one client address: a burst of guessBurst, then one
// every guessEvery. A client with a wrong key sees the 401 that says so many times first; one
// that guesses keys, about one guess a second.
const (
	guessBurst = 20
	guessEvery = time.Second
	// guessCells is the size of the table the allowances are kept in: 32 KiB, whatever the
	// number of addresses.
	guessCells = 1 << 12
)

// guesses keeps each client address's allowance of failed authentications, as a GCRA cell (the
// theoretical arrival time of its next failure) in a table of fixed size indexed by a hash of the
// address, so that it never grows: addresses that share a cell share its allowance. Its seed is
// random per process, so that nobody can choose addresses that share a cell with another's. It is
// safe for concurrent use; make it with newGuesses.
type guesses struct {
	seed  maphash.Seed
	cells [guessCells]atomic.Int64 // Unix nanoseconds; zero for an address with no failure
}

func newGuesses() *guesses { return &guesses{seed: maphash.MakeSeed()} }

// fail counts a failed authentication from addr at now, past the allowance or not.
func (g *guesses) fail(addr string, now time.Time) {
	c, t := g.cell(addr), now.UnixNano()
	for {
		old := c.Load()
		if c.CompareAndSwap(old, max(old, t)+int64(guessEvery)) {
			return
		}
	}
}

// wait returns zero when addr's next failed authentication at now is within its allowance, else
// how long until it would be.
func (g *guesses) wait(addr string, now time.Time) time.Duration {
	t, tolerance := now.UnixNano(), int64((guessBurst-1)*guessEvery)
	return time.Duration(max(g.cell(addr).Load()-t-tolerance, 0))
}

// cell is the cell of addr's allowance.
func (g *guesses) cell(addr string) *atomic.Int64 {
	return &g.cells[maphash.String(g.seed, addr)%guessCells]
}
