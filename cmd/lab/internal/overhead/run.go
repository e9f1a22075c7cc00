package overhead

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
)

// Run starts the stub, the bare proxy and the gateway, runs the warm-up and
// the rounds, and reports what they found, writing a line to progress after
// each step. Everything it starts listens on loopback and is stopped before
// it returns.
//
// When ctx ends, Run returns the report of the steps that had finished,
// with ctx's error.
func Run(ctx context.Context, opts Options, progress io.Writer) (Report, error) {
	if err := opts.validate(); err != nil {
		return Report{}, err
	}
	if err := gatewayproc.CheckBinary(opts.Gateway); err != nil {
		return Report{}, err
	}
	cpus := ownCPUs()
	pinned := opts.Pin && slices.Contains(cpus, loadCPU) && slices.Contains(cpus, targetCPU)
	if pinned {
		if err := pin(os.Getpid(), loadCPU); err != nil {
			return Report{}, err
		}
		defer pin(os.Getpid(), cpus...)
	}
	r, err := startRig(ctx, opts, pinned)
	if err != nil {
		return Report{}, err
	}
	defer r.stop()
	rep := Report{Settings: settingsOf(opts, pinned), LoadAverage: LoadAverage{Start: loadAverage()}}
	err = r.run(ctx, opts, &rep, progress)
	rep.Results = results(rep.Steps, opts.Shapes, opts.Rates, opts.Connections, opts.targets())
	rep.Checks = checks(rep.Results, opts.Shapes, opts.peak(), opts.Connections)
	if err == nil && opts.Soak > 0 {
		rate, from := soakRate(rep.Results, opts.Shapes[0], opts.Connections, opts.peak())
		rep.Soak, err = r.soak(ctx, opts, rate, from, progress)
		rep.Checks = append(rep.Checks, flatHeap(*rep.Soak))
	}
	rep.LoadAverage.End = loadAverage()
	return rep, err
}

func settingsOf(o Options, pinned bool) Settings {
	return Settings{
		Rates:         o.Rates,
		StepSeconds:   o.Step.Seconds(),
		Rounds:        o.Rounds,
		WarmupSeconds: o.Warmup.Seconds(),
		Workers:       o.Workers,
		CPUs:          runtime.NumCPU(),
		Pinned:        pinned,
		Tracing:       o.Tracing,
		Shapes:        o.Shapes,
		Connections:   o.Connections,
		Stores:        o.Stores,
		SoakSeconds:   o.Soak.Seconds(),
	}
}

// rig is the targets, running, and a client of each, in the order of
// Options.targets.
type rig struct {
	dir     string
	stub    *stub
	sink    *sink              // nil when no gateway traces
	redis   *gatewayproc.Redis // nil when no gateway keeps its limits in Redis
	procs   []child
	clients []*client
}

// startRig starts the targets, the processes' files in a temporary
// directory. Pinned, the targets start on loadCPU, where Run keeps this
// process, and so take GOMAXPROCS 1; then they move to targetCPU.
func startRig(ctx context.Context, opts Options, pinned bool) (_ *rig, err error) {
	self := opts.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("overhead: find this program, to run the proxy: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "lab-overhead-")
	if err != nil {
		return nil, fmt.Errorf("overhead: a directory for the processes: %w", err)
	}
	r := &rig{dir: dir}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	if r.stub, err = startStub(limitsFor(opts.sizing())); err != nil {
		return nil, err
	}
	proxy, proxyURL, err := startProxy(self, dir, r.stub.url)
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, proxy)
	r.clients = []*client{newClient(Stub, r.stub.url, nil, opts.connections()), newClient(Proxy, proxyURL, proxy, opts.connections())}
	if err := r.startGateways(ctx, opts); err != nil {
		return nil, err
	}
	if pinned {
		for _, p := range r.procs {
			if err := pin(p.Pid(), targetCPU); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// startGateways starts the gateway that traces nothing, the same in Redis if opts asks, and one
// that traces each share of opts.Tracing, sending its spans to the rig's sink, and adds them and
// their clients to r.
func (r *rig) startGateways(ctx context.Context, opts Options) error {
	if err := r.startGateway(ctx, opts, Gateway, gatewayConfig(r.stub.url, opts.sizing(), opts.connections()), untracedEnv); err != nil {
		return err
	}
	if opts.redis() {
		var err error
		if r.redis, err = gatewayproc.StartRedis(ctx, opts.RedisServer); err != nil {
			return err
		}
		cfg := gatewayConfig(r.stub.url, opts.sizing(), opts.connections())
		cfg.Store = gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{Address: r.redis.Addr, Replicas: 1}}
		if err := r.startGateway(ctx, opts, GatewayRedis, cfg, untracedEnv); err != nil {
			return err
		}
	}
	if len(opts.Tracing) == 0 {
		return nil
	}
	var err error
	if r.sink, err = startSink(); err != nil {
		return err
	}
	for _, share := range opts.Tracing {
		t := tracedTarget(share)
		cfg := gatewayConfig(r.stub.url, opts.sizing(), opts.connections())
		if err := r.startGateway(ctx, opts, t, cfg, tracedEnv(r.sink.endpoint(t), share)); err != nil {
			return err
		}
		r.clients[len(r.clients)-1].spans = func() int64 { return r.sink.received(t) }
	}
	return nil
}

// startGateway starts a gateway, target t, configured with cfg and with env added to its
// environment, and adds it and its client to r.
func (r *rig) startGateway(ctx context.Context, opts Options, t Target, cfg gatewayv1.Config, env []string) error {
	g, err := gatewayproc.Start(ctx, opts.Gateway, "lab-overhead", cfg, nil, env...)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, g)
	c := newClient(t, g.URL, g, opts.connections())
	c.metrics = g.Admin + "/metrics"
	r.clients = append(r.clients, c)
	return nil
}

// stop stops what startRig started and removes its directory.
func (r *rig) stop() {
	for _, c := range r.clients {
		c.http.CloseIdleConnections()
	}
	for _, p := range r.procs {
		p.Stop()
	}
	if r.stub != nil {
		r.stub.close()
	}
	if r.sink != nil {
		r.sink.close()
	}
	if r.redis != nil {
		r.redis.Stop()
	}
	os.RemoveAll(r.dir)
}

// run runs the warm-up, then the rounds, adding each counted step to rep.
// A step that ctx's end cut short is left out.
func (r *rig) run(ctx context.Context, opts Options, rep *Report, progress io.Writer) error {
	shapes := opts.shapes()
	if opts.Warmup > 0 {
		warmup := load{Rate: opts.Rates[0], Workers: opts.Workers}
		for _, shape := range shapes {
			for _, c := range r.clients {
				s, err := r.step(ctx, c, shape, warmup, opts.Warmup)
				if err != nil {
					return err
				}
				fmt.Fprint(progress, progressLine("warm-up", s))
			}
		}
	}
	for round := 1; round <= opts.Rounds; round++ {
		for _, shape := range shapes {
			for _, l := range opts.loads() {
				for _, c := range r.clients {
					s, err := r.step(ctx, c, shape, l, opts.Step)
					if err != nil {
						return err
					}
					s.Round = round
					rep.Steps = append(rep.Steps, s)
					fmt.Fprint(progress, progressLine(fmt.Sprintf("round %d", round), s))
				}
			}
		}
	}
	return nil
}

// step runs one step of c; its error is ctx's when ctx ended during it.
func (r *rig) step(ctx context.Context, c *client, shape Shape, l load, d time.Duration) (Step, error) {
	s, err := c.step(ctx, shape, l, d)
	if err != nil {
		return Step{}, err
	}
	return s, ctx.Err()
}
