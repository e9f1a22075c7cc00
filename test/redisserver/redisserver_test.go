package redisserver_test

import (
	"context"
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
