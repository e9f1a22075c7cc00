// Command gateway is Sluice's OpenAI-compatible gateway. It needs no Kubernetes: it reads one
// configuration file (see api/gateway/v1), follows its changes, and serves the API on --listen
// and health, readiness, metrics and the usage snapshot on --admin-listen. With
// --admin-token-file, every admin endpoint but /healthz and /readyz asks for the token in that
// file, read at each request.
//
//	gateway --config sluice.yaml
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/batches"
	"github.com/sluicehq/sluice/cmd/gateway/internal/configwatch"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/kept"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/cmd/gateway/internal/redisstore"
	"github.com/sluicehq/sluice/cmd/gateway/internal/server"
)

// shutdownGrace is how long calls and job attempts in progress have to finish after SIGTERM.
const shutdownGrace = 30 * time.Second

func main() {
	out := newLogWriter(os.Stderr)
	err := run(out)
	out.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// run builds the gateway and serves until SIGINT or SIGTERM, or until a server fails. It logs
// to out.
func run(out io.Writer) error {
	cl, err := parseCommandLine()
	if err != nil {
		return err
	}
	log := newLogger(out)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tr, err := newTracing(ctx, log, cl.name)
	if err != nil {
		return err
	}
	g := &gateway{commandLine: cl, log: log, reg: newRegistry(), tracing: tr}
	defer g.close()
	if err := g.loadConfig(); err != nil {
		return err
	}
	if err := g.openStore(); err != nil {
		return err
	}
	if err := g.buildServer(); err != nil {
		return err
	}
	endpoints, err := openEndpoints(g.cfg.Server, cl.listen, cl.adminListen, g.srv.Handler(), g.srv.AdminHandler())
	if err != nil {
		return err
	}
	warnDescriptors(g.cfg.Server, log)
	return g.serveUntilStopped(ctx, stop, endpoints)
}

// commandLine is what the gateway's flags set.
type commandLine struct {
	configPath     string
	listen         string
	adminListen    string
	adminTokenFile string
	name           string
}

// parseCommandLine reads the flags. --config is required.
func parseCommandLine() (commandLine, error) {
	var cl commandLine
	defineFlags(flag.CommandLine, &cl)
	flag.Parse()
	if cl.configPath == "" {
		return commandLine{}, errors.New("--config is required")
	}
	if cl.adminTokenFile != "" {
		if _, err := gatewayv1.ReadAdminToken(cl.adminTokenFile); err != nil {
			return commandLine{}, fmt.Errorf("--admin-token-file: %w", err)
		}
	}
	return cl, nil
}

// defineFlags defines the gateway's flags on fs, each setting its field of cl.
func defineFlags(fs *flag.FlagSet, cl *commandLine) {
	fs.StringVar(&cl.configPath, "config", "", "path of the gateway configuration file (YAML or JSON); required")
	fs.StringVar(&cl.listen, "listen", ":8080", "address of the OpenAI-compatible API")
	fs.StringVar(&cl.adminListen, "admin-listen", ":9090", "address of /healthz, /readyz, /metrics, /admin/usage, /admin/queues and POST "+gatewayv1.RecordPath)
	fs.StringVar(&cl.adminTokenFile, "admin-token-file", "", "file of the token that /metrics and /admin/* ask callers for, as 'Authorization: Bearer TOKEN', read at each request; empty leaves them open")
	fs.StringVar(&cl.name, "name", hostname(), "this gateway's name in the usage snapshot")
}

// newLogger logs JSON to out. The Redis client's messages go to it too.
func newLogger(out io.Writer) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(out, nil))
	redis.SetLogger(redisLog{log})
	return log
}

// newRegistry is the gateway's metrics registry. It includes the Go runtime's and the process's
// metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// gateway holds what run builds, step by step, and what the later steps use.
type gateway struct {
	commandLine
	log     *slog.Logger
	reg     *prometheus.Registry
	tracing tracing

	watcher *configwatch.Watcher
	cfg     *gatewayv1.Config // the configuration at start
	started startSettings

	replica string                // this process's name in the jobs' group and the heartbeats
	opts    server.Options        // the store's options, then the server's
	client  redis.UniversalClient // nil for the memory store

	srv      *server.Server
	compiled *policies
}

// loadConfig reads the configuration file and watches it. A change is put in force by
// g.compiled.
func (g *gateway) loadConfig() error {
	watcher, err := configwatch.New(g.configPath, configwatch.Options{
		Logger: g.log, Registerer: g.reg,
		OnReload: func(cfg *gatewayv1.Config) { g.compiled.reload(cfg, g.started) },
	})
	if err != nil {
		return err
	}
	g.watcher, g.cfg = watcher, watcher.Config()
	g.started.store, g.started.server = g.cfg.Store, g.cfg.Server
	return nil
}

// openStore connects the store of the limiter and the jobs that the configuration names.
func (g *gateway) openStore() error {
	g.replica = g.name + "-" + rand.Text()[:8] // unique to this process, in the jobs' group and the heartbeats
	var err error
	g.opts, g.client, err = storeOptions(g.cfg.Store, jobsOptions(g.cfg.Jobs), batchesOptions(g.cfg.Batches), g.replica)
	return err
}

// buildServer builds the server on the store and puts the configuration in force.
func (g *gateway) buildServer() error {
	g.opts.Registerer, g.opts.Gatherer, g.opts.Logger, g.opts.Name = g.reg, g.reg, g.log, g.name
	g.opts.Tracer = g.tracing.tracer()
	g.opts.LimitsLearned = func() { g.compiled.learned() }
	g.opts.ConfigSHA256 = g.watcher.ConfigSHA256
	if path := g.adminTokenFile; path != "" {
		g.opts.AdminToken = func() (string, error) { return gatewayv1.ReadAdminToken(path) }
	}
	g.srv = server.New(g.opts)
	g.compiled = &policies{srv: g.srv, log: g.log, replicas: 1}
	if g.cfg.Store.Redis != nil {
		g.compiled.replicas = int64(g.cfg.Store.Redis.Replicas)
	}
	return g.compiled.configure(g.cfg)
}

// close closes the server, then the store's client, when they were opened, and sends the spans
// not sent yet, within tracingFlush.
func (g *gateway) close() {
	if g.srv != nil {
		g.srv.Close()
	}
	if g.client != nil {
		g.client.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
	defer cancel()
	if err := g.tracing.shutdown(ctx); err != nil {
		g.log.Warn("send the last spans", "err", err)
	}
}

// tracingFlush bounds the sending of the last spans as the gateway stops.
const tracingFlush = 5 * time.Second

// serveUntilStopped serves the endpoints and runs the jobs and the background work until ctx
// ends or a server fails. It returns once the jobs and the background work have stopped.
func (g *gateway) serveUntilStopped(ctx context.Context, stop context.CancelFunc, endpoints []endpoint) error {
	background := g.startBackground(ctx)
	jobsStopped := g.startJobs(ctx)
	g.startSweeps(ctx)
	g.log.Info("gateway serving", "listen", g.listen, "admin", g.adminListen, "adminToken", g.adminTokenFile != "", "providers", len(g.cfg.Providers), "tenants", len(g.cfg.Tenants), "store", g.cfg.Store.Type)
	err := serve(ctx, g.log, endpoints)
	stop() // a server that failed stops the jobs too
	<-jobsStopped
	background.Wait() // before the client closes: the heartbeat leaves the count
	return err
}

// startBackground follows the configuration file until ctx ends. On Redis it also watches the
// store's durability and counts the gateways alive.
func (g *gateway) startBackground(ctx context.Context) *sync.WaitGroup {
	background := &sync.WaitGroup{}
	background.Go(func() { g.watcher.Run(ctx) })
	if g.client != nil {
		background.Go(func() { redisstore.WatchDurability(ctx, g.client, g.reg, g.log) })
		peers := redisstore.NewPeers(g.client, g.replica, g.compiled.setReplicas, g.reg, g.log)
		background.Go(func() { peers.Run(ctx) })
	}
	return background
}

// startJobs runs the jobs until ctx ends. The channel it returns closes once they have stopped.
func (g *gateway) startJobs(ctx context.Context) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.srv.RunJobs(ctx, int(g.cfg.Jobs.Workers), g.cfg.Jobs.ReclaimAfter.Duration/3, shutdownGrace)
	}()
	return stopped
}

// startSweeps sweeps the limiters kept in memory, the store's or its fallback, and the limits
// learned from providers that no answer confirms any more, until ctx ends.
func (g *gateway) startSweeps(ctx context.Context) {
	for _, l := range []admission.Limiter{g.opts.Limiter, g.opts.Fallback} {
		if memory, ok := l.(*ratelimit.Memory); ok {
			go sweep(ctx, memory)
		}
	}
	go forgetStaleLimits(ctx, g.srv)
}

// staleLimitsEvery is how often the gateway looks for learned limits to forget.
const staleLimitsEvery = 10 * time.Second

// forgetStaleLimits forgets, every staleLimitsEvery until ctx ends, the limits learned from
// providers that no answer has reported again for a few minutes.
func forgetStaleLimits(ctx context.Context, srv *server.Server) {
	t := time.NewTicker(staleLimitsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			srv.ForgetStaleLimits()
		}
	}
}

// startSettings are the settings a gateway takes at start, which a change takes a restart to
// apply.
type startSettings struct {
	store  gatewayv1.Store
	server gatewayv1.Server
}

// policies compiles the configuration in force into the server's policy, at this replica's
// share of each limit for the number of replicas last counted, and again when either changes.
// It is safe for concurrent use.
type policies struct {
	srv *server.Server
	log *slog.Logger

	mu       sync.Mutex
	cfg      *gatewayv1.Config
	replicas int64 // the last count of the gateways alive, or store.redis.replicas before one
}

// configure puts cfg in force, or returns why it cannot be.
func (p *policies) configure(cfg *gatewayv1.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	compiled, err := p.compile(cfg, p.replicas)
	if err != nil {
		return err
	}
	p.cfg = cfg
	p.srv.SetPolicy(compiled)
	return nil
}

// setReplicas recompiles the configuration in force for n replicas sharing the limits.
func (p *policies) setReplicas(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == p.replicas {
		return
	}
	compiled, err := p.compile(p.cfg, n)
	if err != nil {
		p.log.Error("recompile the configuration for the replicas counted; the previous shares stay in force", "replicas", n, "err", err)
		return
	}
	p.replicas = n
	p.srv.SetPolicy(compiled)
	p.log.Info("gateway replicas counted; failMode open limits at 1/replicas of each limit", "replicas", n)
}

// learned recompiles the configuration in force for the limits the providers reported lower
// than configured, which their rolling windows then hold to. Each gateway lowers its own
// limits: every replica calls the same accounts and reads the same limits, so the windows
// they share in Redis agree once each has seen one answer.
func (p *policies) learned() {
	p.mu.Lock()
	defer p.mu.Unlock()
	compiled, err := p.compile(p.cfg, p.replicas)
	if err != nil {
		p.log.Error("recompile the configuration for the limits providers reported; the previous limits stay in force", "err", err)
		return
	}
	p.srv.SetPolicy(compiled)
	p.log.Info("the limits learned from providers changed; their calls are paced to them", "learned", p.srv.Learned())
}

// compile compiles cfg for replicas sharing the limits, at the limits learned from the
// providers. The caller holds p.mu.
func (p *policies) compile(cfg *gatewayv1.Config, replicas int64) (*policy.Policy, error) {
	return policy.CompileLearned(cfg, replicas, p.srv.Learned())
}

// reload puts a reloaded configuration in force. The store, the listeners and the HTTP servers
// are set up at start (started): a change to them takes a restart, and reload says so.
func (p *policies) reload(cfg *gatewayv1.Config, started startSettings) {
	if err := p.configure(cfg); err != nil {
		p.log.Error("configuration refused; the previous one stays in force", "err", err)
		return
	}
	if !reflect.DeepEqual(cfg.Store, started.store) {
		p.log.Error("the configuration changes the store; the gateway keeps the one it started with until it restarts")
	}
	if listenerSettings(cfg.Server) != listenerSettings(started.server) {
		p.log.Warn("the configuration changes server settings that take a restart; the gateway keeps readHeaderTimeout, readTimeout, idleTimeout, maxHeaderBytes and maxConnections as it started until it restarts")
	}
	p.log.Info("configuration reloaded", "providers", len(cfg.Providers), "tenants", len(cfg.Tenants))
}

// jobsOptions are the jobs' settings, which a change takes a restart to apply.
func jobsOptions(cfg gatewayv1.Jobs) jobs.Options {
	return jobs.Options{MaxAttempts: int(cfg.MaxAttempts), ReclaimAfter: cfg.ReclaimAfter.Duration, ResultTTL: cfg.ResultTTL.Duration,
		MaxQueuedPerTenant: int(cfg.MaxQueuedPerTenant), MaxBytesPerTenant: cfg.MaxBytesPerTenant}
}

// batchesOptions are the bounds of files and batches, which a change takes a restart to apply.
func batchesOptions(cfg gatewayv1.Batches) batches.Options {
	return batches.Options{MaxFilesPerTenant: int(cfg.MaxFilesPerTenant), MaxBytesPerTenant: cfg.MaxBytesPerTenant, KeepFor: cfg.KeepFor.Duration}
}

// storeOptions connects the store of the limiter, the jobs and the batches: memory, or Redis
// with its fail mode, whose client it returns (nil for memory). replica names this replica in
// the jobs' consumer group.
func storeOptions(store gatewayv1.Store, jobsOpts jobs.Options, batchesOpts batches.Options, replica string) (server.Options, redis.UniversalClient, error) {
	if store.Type != gatewayv1.StoreRedis {
		return server.Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobsOpts), Kept: kept.NewMemory(),
			Batches: batches.NewMemory(batchesOpts)}, nil, nil
	}
	client, err := redisstore.NewClient(store.Redis)
	if err != nil {
		return server.Options{}, nil, err
	}
	opts := server.Options{
		Limiter: ratelimit.NewRedis(client),
		Jobs:    jobs.NewRedis(client, replica, jobsOpts),
		Kept:    kept.NewRedis(client),
		Batches: batches.NewRedis(client, batchesOpts),
		Shares:  redisstore.NewShares(client, replica),
		Ping:    func(ctx context.Context) error { return client.Ping(ctx).Err() },
	}
	if store.Redis.FailMode == gatewayv1.FailOpen {
		opts.Fallback = ratelimit.NewMemory()
	}
	return opts, client, nil
}

// redisLog passes the Redis client's own messages, such as why it cannot connect, into the
// gateway's log.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// sweep drops idle keys from the memory store once a minute.
func sweep(ctx context.Context, m *ratelimit.Memory) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Sweep(now)
		}
	}
}

// listenerSettings are the server settings taken at start: those of the listeners and the
// http.Servers.
func listenerSettings(s gatewayv1.Server) gatewayv1.Server {
	return gatewayv1.Server{ReadHeaderTimeout: s.ReadHeaderTimeout, ReadTimeout: s.ReadTimeout, IdleTimeout: s.IdleTimeout,
		MaxHeaderBytes: s.MaxHeaderBytes, MaxConnections: s.MaxConnections}
}

// serve runs the servers until ctx ends, then gives calls in progress time to finish.
func serve(ctx context.Context, log *slog.Logger, endpoints []endpoint) error {
	errs := make(chan error, len(endpoints))
	for _, e := range endpoints {
		go func() {
			if err := e.server.Serve(e.listener); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", e.server.Addr, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	log.Info("gateway stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, e := range endpoints {
		e.server.Shutdown(shutdown)
	}
	return err
}

func hostname() string {
	name, _ := os.Hostname()
	return name
}
