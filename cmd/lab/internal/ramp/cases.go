package ramp

import (
	"net"
	"net/http"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// unboundedIdle is how many idle connections an unbounded client keeps to a
// host, so that a burst reuses connections rather than opening thousands.
// It bounds nothing: MaxConnsPerHost stays 0.
const unboundedIdle = 4096

// kase is one way of calling the provider.
type kase struct {
	name string
	// allAtOnce sends all of a user's pages at once; otherwise one after
	// another.
	allAtOnce bool
	// gateway is how the gateway in front behaves at its limits; empty
	// means no gateway: the pages go straight to the provider.
	gateway gatewayv1.Behavior
	// pooled caps the client's connections at Options.PoolConns; otherwise
	// they are unbounded.
	pooled bool
	// honoursDoor makes a page that the queue's door turned away wait the
	// Retry-After it was given and come back, as a client of an honest door
	// does: "busy" means "later", not "never".
	honoursDoor bool
	// retries makes a page the provider refused (429 or 503) wait the
	// Retry-After it was given, or a second, and be sent again, as an SDK's
	// client does.
	retries bool
	// steady replaces the books with two tenants sending at steady rates
	// for Options.Duration: an interactive one at Options.InteractiveRate
	// and a batch one at twice what the provider serves.
	steady bool
	// untilDone runs the case until its books are done, at most
	// Options.QueueCap, rather than Options.Duration.
	untilDone bool
	// failover serves the model by a pool: the provider and a second account
	// with a tenth of its limits, and takes the first down for
	// Options.FailoverFor from Options.FailoverAt.
	failover bool
}

// limit is the longest the case runs.
func (c kase) limit(opts Options) time.Duration {
	if c.untilDone {
		return opts.QueueCap
	}
	return opts.Duration
}

// capFlag is the flag that sets the case's limit.
func (c kase) capFlag() string {
	if c.untilDone {
		return "--queue-cap"
	}
	return "--duration"
}

// cases are every case, in their default order.
var cases = []kase{
	{name: CaseSequential},
	{name: CaseBurst, allAtOnce: true},
	{name: CaseReject, allAtOnce: true, gateway: gatewayv1.BehaviorReject},
	{name: CaseQueue, allAtOnce: true, gateway: gatewayv1.BehaviorQueue, honoursDoor: true, untilDone: true},
	{name: CasePool, allAtOnce: true, pooled: true, retries: true},
	{name: CaseInteractive, gateway: gatewayv1.BehaviorQueue, steady: true},
	{name: CaseFailover, allAtOnce: true, gateway: gatewayv1.BehaviorQueue, honoursDoor: true, untilDone: true, failover: true},
}

func caseNamed(name string) (kase, bool) {
	for _, c := range cases {
		if c.name == name {
			return c, true
		}
	}
	return kase{}, false
}

func caseNames() []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}

// client is the HTTP client of the case's users: one, shared by all of them.
func (c kase) client(opts Options) *http.Client {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: unboundedIdle,
		IdleConnTimeout:     90 * time.Second,
	}
	if c.pooled {
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = opts.PoolConns, opts.PoolConns
	}
	return &http.Client{Transport: t}
}
