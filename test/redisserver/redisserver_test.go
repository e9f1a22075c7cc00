package redisserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/poll"
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

// TestSentinelFailover kills the primary of a sentinel group: the sentinels promote the replica,
// and a client that follows them writes to it, with what it wrote before.
func TestSentinelFailover(t *testing.T) {
	ctx := context.Background()
	g := redisserver.StartSentinel(t)
	if got, err := g.PrimaryAddr(ctx); err != nil || got != g.Primary.Addr {
		t.Fatalf("PrimaryAddr = %q, %v; want the primary, %s", got, err, g.Primary.Addr)
	}
	c := g.Client(t)
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET before the failover: %v", err)
	}
	if err := c.Do(ctx, "WAIT", 1, 0).Err(); err != nil { // the replica has it
		t.Fatalf("WAIT: %v", err)
	}

	g.Primary.Kill()
	poll.Until(t, 30*time.Second, "the sentinels to promote the replica", func() bool {
		addr, err := g.PrimaryAddr(ctx)
		return err == nil && addr == g.Replica.Addr
	})
	poll.Until(t, 30*time.Second, "the client to write to the new primary", func() bool { return c.Set(ctx, "after", "1", 0).Err() == nil })
	if got, err := c.Get(ctx, "before").Result(); err != nil || got != "1" {
		t.Fatalf("GET before on the new primary = %q, %v; want 1", got, err)
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
