package ramp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// smallProviderName names the failover case's second account in the gateway's configuration.
const smallProviderName = providerName + "-small"

// account is a simulated provider serving a case: its account, what the provider saw, and where
// it listens. The failover case takes it down and brings it back (see outage).
type account struct {
	name string
	opts provider.Options
	p    *provider.Server
	rec  *recorder

	mu       sync.Mutex
	srv      *http.Server
	url      string
	down, up time.Time // when an outage took it down and it listened again; zero if not
}

// startAccount starts a provider for opts on addr (a free loopback port if empty).
func startAccount(name string, opts provider.Options, addr string) (*account, error) {
	p, err := provider.New(opts)
	if err != nil {
		return nil, err
	}
	a := &account{name: name, opts: opts, p: p, rec: &recorder{next: p, defaultMaxTokens: opts.DefaultMaxTokens}}
	a.srv, a.url, err = serveLocal(a.rec, addr)
	return a, err
}

// shutdown stops the account's server and its provider. It may be called
// more than once.
func (a *account) shutdown() {
	a.mu.Lock()
	srv := a.srv
	a.mu.Unlock()
	a.p.Close()
	shutdown(srv)
}

// outage takes the account down at `at` after start, as a killed process goes: its listener and
// every connection closed at once, calls in the middle of their answers included. After length it
// listens again on the same address, with the same account, until the case ends.
func (a *account) outage(ctx context.Context, start time.Time, at, length time.Duration) {
	if !sleepUntil(ctx, start.Add(at)) {
		return
	}
	a.mu.Lock()
	a.down = time.Now() // before the close: the calls it cuts end after it
	a.srv.Close()
	a.mu.Unlock()
	if !sleepUntil(ctx, start.Add(at+length)) {
		return
	}
	srv, _, err := serveLocal(a.rec, strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		return // the address was taken meanwhile: the account stays down, as the report shows
	}
	a.mu.Lock()
	a.srv, a.up = srv, time.Now()
	a.mu.Unlock()
}

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// smallAccount is a tenth of account's limits (at least one of each), at its prices.
func smallAccount(opts provider.Options) provider.Options {
	opts.RequestsPerMinute = max(opts.RequestsPerMinute/10, 1)
	opts.TokensPerMinute = max(opts.TokensPerMinute/10, 1)
	opts.MaxInFlight = max(opts.MaxInFlight/10, 1)
	return opts
}

// withSmallAccount adds to a queue case's configuration the failover case's second account, at
// url, which serves the same models under its own limits: a pool. The global requests a minute,
// the first account's, become the pool's.
func withSmallAccount(cfg gatewayv1.Config, small provider.Options, url string) gatewayv1.Config {
	p := cfg.Providers[0]
	p.Name, p.BaseURL = smallProviderName, url+"/v1"
	p.RequestsPerMinute, p.TokensPerMinute, p.MaxInFlight = small.RequestsPerMinute, small.TokensPerMinute, small.MaxInFlight
	cfg.Providers = append(cfg.Providers, p)
	for i := range cfg.Tenants {
		cfg.Tenants[i].Providers = append(cfg.Tenants[i].Providers, smallProviderName)
	}
	for i := range cfg.Global {
		cfg.Global[i].Amount += small.RequestsPerMinute
	}
	return cfg
}

// PoolReport is what the failover case's pool did.
type PoolReport struct {
	// Providers are the pool's accounts, the one taken down first.
	Providers []PoolProvider `json:"providers"`
	// DownSeconds and UpSeconds are when, from the case's start, the first account went down and
	// listened again; UpSeconds is zero if the case ended first.
	DownSeconds float64 `json:"downSeconds"`
	UpSeconds   float64 `json:"upSeconds"`
}

// PoolProvider is one account of the pool.
type PoolProvider struct {
	Name string `json:"name"`
	// RequestsPerMinute is its limit.
	RequestsPerMinute int64 `json:"requestsPerMinute"`
	// Served counts the calls it answered 200, by when they arrived: before the outage, during it
	// and after it. Cut counts those whose answer the outage cut: they arrived before it and
	// ended after it began.
	Served [3]int `json:"served"`
	Cut    int    `json:"cut"`
	// Refused counts its 429 and 503 answers.
	Refused int `json:"refused"`
}

// poolReport is what the accounts of the failover case did, the first of them taken down.
func poolReport(accounts []*account, start time.Time) *PoolReport {
	first := accounts[0]
	first.mu.Lock()
	down, up := first.down, first.up
	first.mu.Unlock()
	r := &PoolReport{DownSeconds: secondsSince(start, down), UpSeconds: secondsSince(start, up)}
	for _, a := range accounts {
		pp := PoolProvider{Name: a.name, RequestsPerMinute: a.opts.RequestsPerMinute}
		for _, c := range a.rec.calls(start) {
			switch at := start.Add(c.at); {
			case c.refusedByProvider():
				pp.Refused++
			case a == first && !down.IsZero() && at.Before(down) && !at.Add(c.took).Before(down):
				pp.Cut++
			case c.status != http.StatusOK:
			case down.IsZero() || at.Before(down):
				pp.Served[0]++
			case up.IsZero() || at.Before(up):
				pp.Served[1]++
			default:
				pp.Served[2]++
			}
		}
		r.Providers = append(r.Providers, pp)
	}
	return r
}

func secondsSince(start, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return t.Sub(start).Seconds()
}

// notes are the pool's lines under the tables.
func (r *PoolReport) notes() []string {
	up := "the case ended before it came back"
	if r.UpSeconds > 0 {
		up = fmt.Sprintf("listened again at %.1fs", r.UpSeconds)
	}
	ns := []string{fmt.Sprintf("%s was down (killed: listener and connections closed) from %.1fs; it %s", r.Providers[0].Name, r.DownSeconds, up)}
	for _, p := range r.Providers {
		ns = append(ns, fmt.Sprintf("%s (%d requests a minute) served %d calls that came before the outage, %d during it and %d after it; the outage cut %d; it refused %d (429 or 503)",
			p.Name, p.RequestsPerMinute, p.Served[0], p.Served[1], p.Served[2], p.Cut, p.Refused))
	}
	return ns
}
