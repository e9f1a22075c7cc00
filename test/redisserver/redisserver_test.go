package redisserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/redisserver"
)

func TestServerIsPrivateAndStops(t *testing.T) {
	ctx := context.Background()
	a, b := redisserver.Start(t), redisserver.Start(t)
	if a.Addr == b.Addr {
		t.Fatalf("two servers share the address %s", a.Addr)
	}
	ca, cb := a.Client(t), b.Client(t)
	if err := ca.Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if n, err := cb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS on the other server = %d, %v; want 0, nil", n, err)
	}
	if got, err := ca.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want no persistence", got, err)
	}

	if err := a.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := ca.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Stop succeeded; want an error")
	}
}

func TestAppendOnly(t *testing.T) {
	s := redisserver.Start(t, redisserver.AppendOnly())
	got, err := s.Client(t).ConfigGet(context.Background(), "appendonly").Result()
	if err != nil || got["appendonly"] != "yes" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want yes", got, err)
	}
}

func TestClusterSpreadsSlotsOverThreePrimaries(t *testing.T) {
	ctx := context.Background()
	cluster := redisserver.StartCluster(t)
	client := cluster.Client(t)
	shards, err := client.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 3 {
		t.Fatalf("CLUSTER SHARDS = %d shards, %v; want 3", len(shards), err)
	}
	// Keys of three hash tags that hash to the three primaries' slots, through one client.
	for _, key := range []string{"{a}:k", "{b}:k", "{c}:k"} {
		if err := client.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	err = client.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"{a}:k", "{b}:k"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a script over two hash tags: %v; want CROSSSLOT", err)
	}
}
