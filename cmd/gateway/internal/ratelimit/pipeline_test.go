package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// TestPipelineAnswersEachCaller sends many concurrent decisions on distinct keys through one
// store, so that they share round trips, and checks that each caller gets its own answer: the
// remaining amount of its own key.
func TestPipelineAnswersEachCaller(t *testing.T) {
	server := redisserver.Start(t)
	store := NewRedis(server.Client(t))
	const callers = 200
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			l := mustLimit(NewBucket(fmt.Sprintf("{p}:caller:%d", i), LevelUser, Requests, 1, time.Hour, 1000))
			cost := int64(i + 1)
			d, err := store.Decide(context.Background(), []Check{{Limit: l, Cost: cost}}, time.Now())
			if err != nil {
				t.Error(err)
				return
			}
			if !d.Allowed || d.Remaining[0] != 1000-cost {
				t.Errorf("caller %d: %+v; want allowed with %d remaining", i, d, 1000-cost)
			}
		})
	}
	wg.Wait()
}

// TestPipelineLoadsTheScriptAgain checks that decisions go on after Redis forgets the script.
func TestPipelineLoadsTheScriptAgain(t *testing.T) {
	server := redisserver.Start(t)
	client := server.Client(t)
	store := NewRedis(client)
	checks := []Check{{Limit: mustLimit(NewBucket("{p}:k", LevelUser, Requests, 1, time.Hour, 10)), Cost: 1}}
	for range 2 {
		if err := client.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Decide(context.Background(), checks, time.Now()); err != nil {
			t.Fatalf("Decide after SCRIPT FLUSH: %v", err)
		}
	}
}
