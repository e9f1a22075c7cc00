// Command gateway is Sluice's OpenAI-compatible gateway. It needs no Kubernetes: it reads one
// configuration file (see api/gateway/v1), follows its changes, and serves the API on --listen
// and health, readiness, metrics and the usage snapshot on --admin-listen.
//
//	gateway --config sluice.yaml
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
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
	"github.com/sluicehq/sluice/cmd/gateway/internal/configwatch"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/cmd/gateway/internal/redisstore"
	"github.com/sluicehq/sluice/cmd/gateway/internal/server"
)

// shutdownGrace is how long calls and job attempts in progress have to finish after SIGTERM.
const shutdownGrace = 30 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	configPath := flag.String("config", "", "path of the gateway configuration file (YAML or JSON); required")
	listen := flag.String("listen", ":8080", "address of the OpenAI-compatible API")
	adminListen := flag.String("admin-listen", ":9090", "address of /healthz, /readyz, /metrics and /admin/usage")
	name := flag.String("name", hostname(), "this gateway's name in the usage snapshot")
	flag.Parse()
	if *configPath == "" {
		return errors.New("--config is required")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	redis.SetLogger(redisLog{log})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var compiled *policies
	var started startSettings
	watcher, err := configwatch.New(*configPath, configwatch.Options{
		Logger: log, Registerer: reg,
		OnReload: func(cfg *gatewayv1.Config) { compiled.reload(cfg, started) },
	})
	if err != nil {
		return err
	}
	cfg := watcher.Config()
	started.store, started.server = cfg.Store, cfg.Server
	replica := *name + "-" + rand.Text()[:8] // unique to this process, in the jobs' group and the heartbeats
	opts, client, err := storeOptions(cfg.Store, jobsOptions(cfg.Jobs), replica)
	if err != nil {
		return err
	}
	if client != nil {
		defer client.Close()
	}
	opts.Registerer, opts.Gatherer, opts.Logger, opts.Name = reg, reg, log, *name
	opts.LimitsLearned = func() { compiled.learned() }
	srv := server.New(opts)
	defer srv.Close()
	compiled = &policies{srv: srv, log: log, replicas: 1}
	if cfg.Store.Redis != nil {
		compiled.replicas = int64(cfg.Store.Redis.Replicas)
	}
	if err := compiled.configure(cfg); err != nil {
		return err
	}
	endpoints, err := openEndpoints(cfg.Server, *listen, *adminListen, srv.Handler(), srv.AdminHandler())
	if err != nil {
		return err
	}
	warnDescriptors(cfg.Server, log)
	var background sync.WaitGroup
	background.Go(func() { watcher.Run(ctx) })
	if client != nil {
		background.Go(func() { redisstore.WatchDurability(ctx, client, reg, log) })
		peers := redisstore.NewPeers(client, replica, compiled.setReplicas, reg, log)
		background.Go(func() { peers.Run(ctx) })
	}
	jobsStopped := make(chan struct{})
	go func() {
		defer close(jobsStopped)
		srv.RunJobs(ctx, int(cfg.Jobs.Workers), cfg.Jobs.ReclaimAfter.Duration/3, shutdownGrace)
	}()
	for _, l := range []admission.Limiter{opts.Limiter, opts.Fallback} {
		if memory, ok := l.(*ratelimit.Memory); ok {
			go sweep(ctx, memory)
		}
	}
	log.Info("gateway serving", "listen", *listen, "admin", *adminListen, "providers", len(cfg.Providers), "tenants", len(cfg.Tenants), "store", cfg.Store.Type)
	err = serve(ctx, log, endpoints)
	stop() // a server that failed stops the jobs too
	<-jobsStopped
	background.Wait() // before the client closes: the heartbeat leaves the count
	return err
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
	p.log.Info("providers reported limits lower than configured; their calls are paced to them", "learned", p.srv.Learned())
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

// storeOptions connects the store of the limiter and the jobs: memory, or Redis with its fail
// mode, whose client it returns (nil for memory). replica names this replica in the jobs'
// consumer group.
func storeOptions(store gatewayv1.Store, jobsOpts jobs.Options, replica string) (server.Options, redis.UniversalClient, error) {
	if store.Type != gatewayv1.StoreRedis {
		return server.Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobsOpts)}, nil, nil
	}
	client, err := redisstore.NewClient(store.Redis)
	if err != nil {
		return server.Options{}, nil, err
	}
	opts := server.Options{
		Limiter: ratelimit.NewRedis(client),
		Jobs:    jobs.NewRedis(client, replica, jobsOpts),
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
