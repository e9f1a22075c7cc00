package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Durability is whether a Redis keeps the limits it was told across a restart and under memory
// pressure, as it says of itself. Each is a Setting: a Cluster has it when every primary has.
type Durability struct {
	// Persistent: append-only persistence on (INFO persistence: aof_enabled), its fsync not left
	// to the operating system (CONFIG GET appendfsync is not "no", when CONFIG may be used).
	Persistent Setting
	// NoEviction: maxmemory-policy noeviction (INFO memory), so that Redis refuses writes when
	// full rather than dropping a tenant's spend.
	NoEviction Setting
}

// Setting is what a Redis said of one of its settings.
type Setting int8

// The settings' values, as the gauges export them.
const (
	// Unknown: Redis has not been asked yet, or refused to say (INFO disabled).
	Unknown Setting = -1
	Off     Setting = 0
	On      Setting = 1
)

// and is s for a Redis of several primaries, one of which says t.
func (s Setting) and(t Setting) Setting { return min(s, t) }

// CheckDurability asks the Redis behind client what it keeps: every primary of a Cluster, the
// primary of Sentinel, or the one server.
func CheckDurability(ctx context.Context, client redis.UniversalClient) (Durability, error) {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return durabilityOf(ctx, client)
	}
	var mu sync.Mutex
	all := Durability{Persistent: On, NoEviction: On}
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		d, err := durabilityOf(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		all.Persistent, all.NoEviction = all.Persistent.and(d.Persistent), all.NoEviction.and(d.NoEviction)
		return err
	})
	return all, err
}

// durabilityOf asks one server. A server that refuses INFO or CONFIG (a managed Redis may
// disable them) leaves what it would have said Unknown; an error is returned only when the
// server cannot be reached.
func durabilityOf(ctx context.Context, c redis.Cmdable) (Durability, error) {
	d := Durability{Persistent: Unknown, NoEviction: Unknown}
	persistence, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return d, unlessRefused(err)
	}
	fsync, err := c.ConfigGet(ctx, "appendfsync").Result()
	if err != nil && unlessRefused(err) != nil {
		return d, err
	}
	d.Persistent = settingOf(infoField(persistence, "aof_enabled") == "1" && fsync["appendfsync"] != "no")
	memory, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return d, unlessRefused(err)
	}
	d.NoEviction = settingOf(infoField(memory, "maxmemory_policy") == "noeviction")
	return d, nil
}

// unlessRefused returns err unless Redis answered it: a command it refuses is no failure to
// reach it.
func unlessRefused(err error) error {
	if answer := redis.Error(nil); errors.As(err, &answer) {
		return nil
	}
	return err
}

func settingOf(on bool) Setting {
	if on {
		return On
	}
	return Off
}

// infoField returns the value of name in an INFO answer ("name:value" lines), or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return value
		}
	}
	return ""
}

// durabilityEvery is how often WatchDurability asks again: a Redis restarted with other
// settings is seen within it.
const durabilityEvery = time.Minute

// WatchDurability asks Redis what it keeps now and every minute until ctx ends, exports it as
// sluice_gateway_store_persistent and sluice_gateway_store_noeviction (1, 0, or -1 when Redis did
// not say), and warns in the log when a setting is off, once each time it changes.
func WatchDurability(ctx context.Context, client redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) {
	persistent := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_gateway_store_persistent",
		Help: "1 when Redis runs with append-only persistence (appendonly yes, appendfsync not no), so that budgets and quotas survive its restart; 0 when not; -1 when it did not say.",
	})
	noEviction := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_gateway_store_noeviction",
		Help: "1 when Redis runs with maxmemory-policy noeviction, so that it never drops a limit's state; 0 when not; -1 when it did not say.",
	})
	reg.MustRegister(persistent, noEviction)
	persistent.Set(float64(Unknown))
	noEviction.Set(float64(Unknown))
	last := Durability{Persistent: Unknown, NoEviction: Unknown}
	t := time.NewTicker(durabilityEvery)
	defer t.Stop()
	for {
		if d, err := CheckDurability(ctx, client); err == nil {
			persistent.Set(float64(d.Persistent))
			noEviction.Set(float64(d.NoEviction))
			warnChanged(log, last, d)
			last = d
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// warnChanged logs each setting that has turned off since last.
func warnChanged(log *slog.Logger, last, now Durability) {
	if now.Persistent == Off && last.Persistent != Off {
		log.Warn("Redis runs without append-only persistence: a restart of Redis gives every budget and quota back; run it with appendonly yes and appendfsync everysec")
	}
	if now.NoEviction == Off && last.NoEviction != Off {
		log.Warn("Redis may evict keys: under memory pressure it can drop a tenant's spend; run it with maxmemory-policy noeviction")
	}
}
