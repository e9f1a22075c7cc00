package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/cmd/gateway/internal/configwatch"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/cmd/gateway/internal/redisstore"
	"github.com/sluicehq/sluice/cmd/gateway/internal/server"
	"github.com/sluicehq/sluice/test/metricsdoc"
)

// describing is a prometheus.Registerer that keeps the names of the series registered with it,
// from their descriptors, whether or not any has a value yet.
type describing struct{ names []string }

func (d *describing) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for desc := range descs {
		d.names = append(d.names, metricsdoc.NameOf(desc))
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return true }

// TestEveryMetricHasARowInTheREADME registers every series the gateway registers, as run does
// with the memory store and with Redis, and checks them against the table of metrics in
// config/README.md: each has a row, and each row names series the gateway registers (the manager's and the
// adapter's rows are checked beside them).
func TestEveryMetricHasARowInTheREADME(t *testing.T) {
	reg := &describing{}
	log := slog.New(slog.DiscardHandler)
	config := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: gateway.sluice.dev/v1\nkind: GatewayConfig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := configwatch.New(config, configwatch.Options{Logger: log, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{}), Registerer: reg, Gatherer: prometheus.NewRegistry()})
	t.Cleanup(srv.Close)
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never reached: the context has ended
	t.Cleanup(func() { client.Close() })
	stopped, stop := context.WithCancel(t.Context())
	stop()
	redisstore.WatchDurability(stopped, client, reg, log)
	redisstore.NewPeers(client, "test", func(int64) {}, reg, log)

	metricsdoc.Check(t, "../../config/README.md", reg.names, "sluice_gateway_", "sluice_config_", "gen_ai_")
}
