package ramp

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// providerShutdown bounds how long the provider waits for calls still in
// progress when a case ends.
const providerShutdown = 5 * time.Second

// Run runs the cases opts names, one after another, each against a fresh
// provider on a loopback port, and returns what they found. It writes a
// line to progress at each step of each case, and one when a case ends.
//
// When ctx ends, the case in progress stops as if its Duration had passed
// and Run returns the report so far with ctx's error.
func Run(ctx context.Context, opts Options, progress io.Writer) (Report, error) {
	if err := opts.validate(); err != nil {
		return Report{}, err
	}
	if err := checkGateway(opts); err != nil {
		return Report{}, err
	}
	rep := Report{Settings: settingsOf(opts)}
	for _, name := range opts.Cases {
		c, _ := caseNamed(name) // validated
		cr, err := runCase(ctx, opts, c, progress)
		if err != nil {
			return rep, err
		}
		rep.Cases = append(rep.Cases, cr)
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checkGateway fails early, before any case has run, when a case needs
// the gateway binary and it is not there.
func checkGateway(opts Options) error {
	if len(opts.GatewayURLs) > 0 {
		return nil
	}
	for _, name := range opts.Cases {
		if c, _ := caseNamed(name); c.gateway != "" {
			if err := gatewayproc.CheckBinary(opts.Gateway); err != nil {
				return fmt.Errorf("ramp: the %s case needs the gateway: %w", name, err)
			}
			return nil
		}
	}
	return nil
}

func settingsOf(o Options) Settings {
	p := o.Provider
	s := Settings{
		Users:                 o.Users,
		StepSeconds:           o.Step.Seconds(),
		PagesPerBook:          o.Pages,
		PromptTokens:          o.PromptTokens,
		MaxTokens:             o.MaxTokens,
		DurationSeconds:       o.Duration.Seconds(),
		QueueCapSeconds:       o.QueueCap.Seconds(),
		RequestsPerMinute:     p.RequestsPerMinute,
		TokensPerMinute:       p.TokensPerMinute,
		MaxInFlight:           p.MaxInFlight,
		LatencySeconds:        p.Latency.Seconds(),
		LatencyStdDevSeconds:  p.LatencyStdDev.Seconds(),
		SizeSpread:            o.SizeSpread,
		Text:                  o.Text,
		HugePages:             o.HugePages,
		HugePromptTokens:      o.HugePromptTokens,
		SpreadPages:           o.SpreadPages,
		InputPricePerMillion:  pricesOf(p).InputPerMillion,
		OutputPricePerMillion: pricesOf(p).OutputPerMillion,
		PoolConns:             o.PoolConns,
		UserBurst:             o.UserBurst,
		UserRequestsPerSecond: o.UserRate,
		QueueMaxWaitSeconds:   o.MaxWait.Seconds(),
		Gateways:              o.Gateways,
		Comebacks:             o.Comebacks,
	}
	if o.LongPromptTokens > 0 {
		s.LongPromptTokens, s.LongMaxTokens, s.LongUsers = o.LongPromptTokens, o.longMaxTokens(), o.LongUsers
	}
	return s
}

// runCase runs one case against a provider of its own (the failover case against a pool of two),
// and the gateway if the case has one.
func runCase(ctx context.Context, opts Options, c kase, progress io.Writer) (CaseReport, error) {
	accounts, err := startAccounts(opts, c)
	defer func() {
		for _, a := range accounts {
			a.shutdown()
		}
	}()
	if err != nil {
		return CaseReport{}, err
	}
	t, stopGateway, err := targetOf(ctx, opts, c, accounts)
	if err != nil {
		return CaseReport{}, err
	}
	l, elapsed := drive(ctx, opts, c, t, progress, accounts[0])
	stopGateway()
	for _, a := range accounts {
		a.shutdown()
	}
	run := caseRun{
		name: c.name, queued: c.gateway == gatewayv1.BehaviorQueue && !c.steady, steady: c.steady, limit: c.limit(opts), capFlag: c.capFlag(), comebacks: opts.Comebacks,
		schedule: schedule{users: opts.Users, step: opts.Step}, elapsed: elapsed,
		pages:  l.recorded(),
		prices: pricesOf(opts.Provider),
	}
	for _, a := range accounts {
		run.calls = append(run.calls, a.rec.calls(l.start)...)
		run.stats = addStats(run.stats, a.p.Stats())
		run.tokensPerMinute += a.opts.TokensPerMinute
		run.maxInFlight += a.opts.MaxInFlight
	}
	cr := summarize(run)
	if c.failover {
		cr.Pool = poolReport(accounts, l.start)
		cr.Notes = append(cr.Notes, cr.Pool.notes()...)
	}
	fmt.Fprintf(progress, "%-10s done in %.1fs: %d of %d books clean\n", c.name, elapsed.Seconds(), cr.CleanBooks, cr.Books)
	return cr, nil
}

// startAccounts starts the case's providers: the account of opts, and for the failover case a
// second one with a tenth of its limits.
func startAccounts(opts Options, c kase) ([]*account, error) {
	first, err := startAccount(providerName, opts.Provider, opts.ProviderAddr)
	if err != nil || !c.failover {
		return []*account{first}, err
	}
	small, err := startAccount(smallProviderName, smallAccount(opts.Provider), "")
	return []*account{first, small}, err
}

// addStats adds up two providers' counts.
func addStats(a, b provider.Stats) provider.Stats {
	return provider.Stats{
		Accepted: a.Accepted + b.Accepted, Rejected429Requests: a.Rejected429Requests + b.Rejected429Requests,
		Rejected429Tokens: a.Rejected429Tokens + b.Rejected429Tokens, Rejected503: a.Rejected503 + b.Rejected503,
		Canceled: a.Canceled + b.Canceled, InFlight: a.InFlight + b.InFlight, MaxInFlightSeen: max(a.MaxInFlightSeen, b.MaxInFlightSeen),
		Rejected429InputTokens: a.Rejected429InputTokens + b.Rejected429InputTokens, Rejected429OutputTokens: a.Rejected429OutputTokens + b.Rejected429OutputTokens,
		Rejected429RequestsPerDay: a.Rejected429RequestsPerDay + b.Rejected429RequestsPerDay, PromptTokens: a.PromptTokens + b.PromptTokens,
		CachedPromptTokens: a.CachedPromptTokens + b.CachedPromptTokens, AudioPromptTokens: a.AudioPromptTokens + b.AudioPromptTokens,
		CompletionTokens: a.CompletionTokens + b.CompletionTokens, ReasoningTokens: a.ReasoningTokens + b.ReasoningTokens,
		AudioCompletionTokens: a.AudioCompletionTokens + b.AudioCompletionTokens, MicroDollars: a.MicroDollars + b.MicroDollars,
		Received: addCounts(a.Received, b.Received),
	}
}

// addCounts adds up two providers' counts by route.
func addCounts(a, b map[string]int64) map[string]int64 {
	sum := map[string]int64{}
	for _, counts := range []map[string]int64{a, b} {
		for route, n := range counts {
			sum[route] += n
		}
	}
	return sum
}

// drive runs the case's users against t for at most its cap and returns
// what they did and how long it took. The failover case's first account goes
// down meanwhile.
func drive(ctx context.Context, opts Options, c kase, t target, progress io.Writer, first *account) (*load, time.Duration) {
	client := c.client(opts)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, c.limit(opts))
	defer cancel()
	l := &load{
		kase: c, opts: opts, client: client, target: t,
		bodies: newCrowdBodies(opts),
		start:  time.Now(),
	}
	if c.failover {
		var outage sync.WaitGroup
		outage.Go(func() { first.outage(ctx, l.start, opts.FailoverAt, opts.FailoverFor) })
		defer outage.Wait()
		defer cancel() // before the wait: an outage the case outlasted ends with it
	}
	if c.steady {
		l.steady(ctx, progress)
	} else {
		l.run(ctx, progress)
	}
	return l, time.Since(l.start)
}

// targetOf is where the case's pages go: the provider, or the gateways in
// front of it, which the returned function stops.
func targetOf(ctx context.Context, opts Options, c kase, accounts []*account) (target, func(), error) {
	if c.gateway == "" {
		key := opts.Provider.APIKey
		return target{urls: []string{accounts[0].url}, key: func(int) string { return key }}, func() {}, nil
	}
	if len(opts.GatewayURLs) > 0 {
		return target{urls: opts.GatewayURLs, key: userKey}, func() {}, nil
	}
	var stops stack
	cfg := gatewayConfig(opts, c.gateway, accounts[0].url, opts.Users[len(opts.Users)-1])
	if c.steady {
		cfg.Tenants = mixedTenants(opts)
	}
	if c.failover {
		cfg = withSmallAccount(cfg, accounts[1].opts, accounts[1].url)
	}
	if opts.Gateways > 1 {
		r, err := gatewayproc.StartRedis(ctx, opts.RedisServer)
		if err != nil {
			return target{}, nil, err
		}
		stops.push(r.Stop)
		cfg.Store = sharedStore(r.Addr, opts.Gateways)
	}
	t := target{key: userKey}
	for range opts.Gateways {
		g, err := gatewayproc.Start(ctx, opts.Gateway, "lab-ramp", cfg, gatewayFiles(opts.Provider.APIKey))
		if err != nil {
			stops.run()
			return target{}, nil, err
		}
		stops.push(g.Stop)
		t.urls = append(t.urls, g.URL)
	}
	return t, stops.run, nil
}

// stack is what to stop, the last started first.
type stack []func()

func (s *stack) push(stop func()) { *s = append(*s, stop) }

func (s stack) run() {
	for i := len(s) - 1; i >= 0; i-- {
		s[i]()
	}
}

// serveLocal serves h on addr, or on a free loopback port if addr is empty,
// and returns its base URL.
func serveLocal(h http.Handler, addr string) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", cmp.Or(addr, "127.0.0.1:0"))
	if err != nil {
		return nil, "", fmt.Errorf("ramp: listen for the provider: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // returns ErrServerClosed at shutdown
	return srv, "http://" + ln.Addr().String(), nil
}

// shutdown stops srv, letting calls in progress finish for up to
// providerShutdown. It may be called more than once.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), providerShutdown)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
}

// pricesOf are the provider's prices as the gateway's configuration writes
// them.
func pricesOf(p provider.Options) gatewayv1.Prices {
	return gatewayv1.Prices{
		InputPerMillion:  gatewayv1.MoneyFromMicro(p.InputMicrosPerMillion),
		OutputPerMillion: gatewayv1.MoneyFromMicro(p.OutputMicrosPerMillion),
	}
}
