package kept

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// TestRedisFinishSentAgainIsToldTrueAgain runs one Finish's script twice, as a client does that
// timed out waiting for the first run's answer: the call is told true both times, and a Finish
// of another call is told false.
func TestRedisFinishSentAgainIsToldTrueAgain(t *testing.T) {
	ctx := context.Background()
	s := NewRedis(redisserver.Start(t).Client(t))
	follow(t, s, background("resp_1", "gw-1", now))
	for _, attempt := range []string{"first", "second"} {
		if removed, err := s.finish(ctx, "resp_1", "token-a"); err != nil || !removed {
			t.Errorf("the %s run of one Finish = %v, %v; want true", attempt, removed, err)
		}
	}
	if finish(t, s, "resp_1") {
		t.Error("another Finish = true; want false")
	}
}

// TestRedisFollowKeysDoNotExpire checks that a follow outlives any ttl, and that an owner's key
// carries its ttl.
func TestRedisFollowKeysDoNotExpire(t *testing.T) {
	ctx := context.Background()
	client := redisserver.Start(t).Client(t)
	s := NewRedis(client)
	follow(t, s, background("resp_1", "gw-1", now))
	own(t, s, acme, time.Hour, "resp_1")
	for _, key := range followKeys {
		if ttl, err := client.PTTL(ctx, key).Result(); err != nil || ttl != -1 {
			t.Errorf("PTTL %s = %s, %v; want none (-1)", key, ttl, err)
		}
	}
	if ttl, err := client.PTTL(ctx, ownerKey("resp_1")).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("PTTL of the owner = %s, %v; want at most an hour", ttl, err)
	}
}
