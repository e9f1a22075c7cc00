package redisstore

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/redisserver"
)

func TestUniversalOptions(t *testing.T) {
	secrets := credentials{password: "p", sentinelPassword: "sp"}
	tests := []struct {
		name string
		cfg  gatewayv1.RedisStore
		want redis.UniversalOptions
	}{{
		name: "one server",
		cfg:  gatewayv1.RedisStore{Address: "redis:6379", Username: "u", DB: 3},
		want: redis.UniversalOptions{Addrs: []string{"redis:6379"}, Username: "u", Password: "p", DB: 3},
	}, {
		name: "sentinel",
		cfg: gatewayv1.RedisStore{Sentinel: &gatewayv1.RedisSentinel{MasterName: "sluice", Addresses: []string{"s1:26379", "s2:26379"}, Username: "su"},
			DB: 1},
		want: redis.UniversalOptions{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "sluice", Password: "p", DB: 1,
			SentinelUsername: "su", SentinelPassword: "sp"},
	}, {
		name: "cluster with one seed",
		cfg:  gatewayv1.RedisStore{Cluster: &gatewayv1.RedisCluster{Addresses: []string{"node-0:6379"}}},
		want: redis.UniversalOptions{Addrs: []string{"node-0:6379"}, IsClusterMode: true, Password: "p"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := universalOptions(&tc.cfg, secrets)
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreUnexported(redis.UniversalOptions{})); diff != "" {
				t.Errorf("universalOptions mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// TestCheckDurability asks real servers what they keep, one of them refusing CONFIG as a
// managed Redis may.
func TestCheckDurability(t *testing.T) {
	tests := []struct {
		name string
		opts []redisserver.Option
		want Durability
	}{
		{name: "nothing kept", opts: []redisserver.Option{redisserver.MaxMemoryPolicy("allkeys-lru")}, want: Durability{Persistent: Off, NoEviction: Off}},
		{name: "append-only, no eviction", opts: []redisserver.Option{redisserver.AppendOnly()}, want: Durability{Persistent: On, NoEviction: On}},
		{name: "CONFIG disabled", opts: []redisserver.Option{redisserver.AppendOnly(), redisserver.WithoutCommand("CONFIG")}, want: Durability{Persistent: On, NoEviction: On}},
		{name: "INFO disabled", opts: []redisserver.Option{redisserver.WithoutCommand("INFO")}, want: Durability{Persistent: Unknown, NoEviction: Unknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := redisserver.Start(t, tc.opts...)
			got, err := CheckDurability(context.Background(), s.Client(t))
			if err != nil {
				t.Fatalf("CheckDurability: %v", err)
			}
			if got != tc.want {
				t.Errorf("CheckDurability = %+v; want %+v", got, tc.want)
			}
		})
	}
}

// TestPeersCount beats for three gateways in one Redis: each counts all three, and one that
// leaves is not counted any more.
func TestPeersCount(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var peers []*Peers
	for _, id := range []string{"gw-a", "gw-b", "gw-c"} {
		peers = append(peers, NewPeers(client, id, func(int64) {}, prometheus.NewRegistry(), log))
	}
	var got []int64
	for _, p := range peers {
		n, err := p.beat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if diff := cmp.Diff(got, []int64{1, 2, 3}); diff != "" {
		t.Errorf("counts as the gateways join (-got +want):\n%s", diff)
	}
	peers[2].leave()
	if n, err := peers[0].beat(ctx); err != nil || n != 2 {
		t.Errorf("count after one left = %d, %v; want 2", n, err)
	}
	if ttl := client.PTTL(ctx, PeersKey).Val(); ttl <= 0 || ttl > HeartbeatTTL {
		t.Errorf("the count's key lives %s; want at most a heartbeat's %s, so that it goes with the gateways", ttl, HeartbeatTTL)
	}
}
