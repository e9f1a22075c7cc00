package redisstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// PeersKey is the sorted set of the gateways alive: each scored by when its heartbeat expires,
// on Redis's clock. Its hash tag keeps it in one Cluster slot.
const PeersKey = "{sluice-gateways}:alive"

// The heartbeat: every HeartbeatEvery a gateway says it is alive for HeartbeatTTL, so that one
// that died is no longer counted after at most HeartbeatTTL, and one that misses a beat or two
// (a Redis that stalled) still is.
const (
	HeartbeatEvery = 2 * time.Second
	HeartbeatTTL   = 5 * HeartbeatEvery
)

// beatScript renews one gateway's heartbeat, drops those expired, and answers how many are
// alive, all on Redis's clock, so that no two gateways' clocks need agree.
var beatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
`)

// Peers counts the gateways that share a Redis, by their heartbeats. The zero value is not
// usable; call NewPeers. Run it in one goroutine.
type Peers struct {
	client  redis.UniversalClient
	id      string
	onCount func(n int64)
	counted prometheus.Gauge
	log     *slog.Logger
}

// NewPeers returns the heartbeat of the gateway id (unique to this process) in client's Redis.
// onCount is called with the number of gateways alive, this one included, whenever it changes;
// never while Redis is unreachable, so that the last count stays in force meanwhile. The count
// is exported as sluice_gateway_replicas.
func NewPeers(client redis.UniversalClient, id string, onCount func(n int64), reg prometheus.Registerer, log *slog.Logger) *Peers {
	p := &Peers{client: client, id: id, onCount: onCount, log: log,
		counted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_gateway_replicas",
			Help: "The gateways alive by their heartbeats in Redis, when this one last counted them (0 before it has); failMode open limits at 1/N of each limit.",
		})}
	reg.MustRegister(p.counted)
	return p
}

// Run beats until ctx ends, then takes this gateway out of the count, so that the others count
// it gone at once rather than when its heartbeat expires.
func (p *Peers) Run(ctx context.Context) {
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	var last int64
	for {
		if n, err := p.beat(ctx); err == nil && n != last {
			last = n
			p.counted.Set(float64(n))
			p.onCount(n)
		}
		select {
		case <-ctx.Done():
			p.leave()
			return
		case <-t.C:
		}
	}
}

// beat renews this gateway's heartbeat and returns how many gateways are alive.
func (p *Peers) beat(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, HeartbeatEvery)
	defer cancel()
	return beatScript.Run(ctx, p.client, []string{PeersKey}, p.id, HeartbeatTTL.Milliseconds()).Int64()
}

func (p *Peers) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.client.ZRem(ctx, PeersKey, p.id).Err(); err != nil {
		p.log.Warn("leave the gateways' count in Redis; the others count this one until its heartbeat expires", "err", err)
	}
}
