// Package balance spreads a provider's calls over its endpoints, the Pods of a self-hosted
// model: each call goes to the endpoint with the fewest of this gateway's calls in flight.
//
// The gateway caps a self-hosted provider's calls in flight at its Pods' capacity together
// (ready Pods × GPUs per Pod × calls per GPU). With every Pod the same size, sending each call to
// the least busy Pod keeps every Pod within its own share: while the total is under n × c, the
// least busy of n Pods has fewer than c. A Service in between would spread connections, not calls,
// and let one Pod queue while another idles.
package balance

import (
	"net/url"
	"sync"
)

// Balancer counts the calls in flight at each endpoint's server (its host and port, which the
// endpoints of one Pod share). The zero value is ready to use. A Balancer is safe for concurrent
// use.
type Balancer struct {
	mu       sync.Mutex
	inFlight map[string]int // by endpoint host:port, a server; one with none has no entry
	next     int            // where the next pick starts looking, so that ties take turns
}

// Pick returns a lease on the endpoint with the fewest calls in flight, ties taken in turn, and
// counts a call on it until the lease is released. It returns nil when there is no endpoint. One
// endpoint is returned at once, uncounted: there is nothing to choose.
func (b *Balancer) Pick(endpoints []*url.URL) *Lease {
	return b.pick(endpoints, "")
}

// PickOther releases failed, the lease of a call whose endpoint could not be reached, and returns
// a lease on the least busy of the other endpoints, or on the same one when there is no other.
func (b *Balancer) PickOther(endpoints []*url.URL, failed *Lease) *Lease {
	failed.Release()
	avoid := ""
	if failed != nil {
		avoid = failed.URL.Host
	}
	return b.pick(endpoints, avoid)
}

// pick is Pick, passing over the endpoint at the host:port avoid unless it is the only one.
func (b *Balancer) pick(endpoints []*url.URL, avoid string) *Lease {
	switch len(endpoints) {
	case 0:
		return nil
	case 1:
		return &Lease{URL: endpoints[0]}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight == nil {
		b.inFlight = map[string]int{}
	}
	start := b.next % len(endpoints)
	b.next++
	var best *url.URL
	least := 0
	for i := range endpoints {
		u := endpoints[(start+i)%len(endpoints)]
		if n := b.inFlight[u.Host]; u.Host != avoid && (best == nil || n < least) {
			best, least = u, n
		}
	}
	if best == nil { // every endpoint is the one to avoid
		best = endpoints[start]
	}
	b.inFlight[best.Host]++
	return &Lease{URL: best, b: b, key: best.Host}
}

// inFlightAt returns the calls counted in flight at an endpoint's server.
func (b *Balancer) inFlightAt(endpoint *url.URL) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight[endpoint.Host]
}

func (b *Balancer) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight[key]--; b.inFlight[key] <= 0 {
		delete(b.inFlight, key)
	}
}

// Lease is one call's hold on an endpoint.
type Lease struct {
	// URL is the endpoint the call goes to.
	URL *url.URL

	b    *Balancer // nil when the call was not counted
	key  string
	once sync.Once
}

// Release ends the call's hold on its endpoint. Calling it again, or on a nil Lease, does
// nothing.
func (l *Lease) Release() {
	if l != nil && l.b != nil {
		l.once.Do(func() { l.b.release(l.key) })
	}
}
