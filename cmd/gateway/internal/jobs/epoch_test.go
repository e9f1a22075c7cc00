package jobs

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/redisserver"
)

func TestIDsCarryTheirEpoch(t *testing.T) {
	epoch := newEpoch()
	id := newID(epoch)
	cases := []struct {
		name, id  string
		wantEpoch string
		wantOK    bool
	}{
		{name: "a new id", id: id, wantEpoch: epoch, wantOK: true},
		{name: "an id made before ids carried an epoch", id: "job_" + rand.Text()},
		{name: "a malformed id", id: "job_nope"},
		{name: "another prefix", id: "req_" + strings.TrimPrefix(id, "job_")},
		{name: "another alphabet", id: strings.ToLower(id)},
		{name: "one character more", id: id + "A"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := epochOf(tc.id); got != tc.wantEpoch || ok != tc.wantOK {
				t.Errorf("epochOf(%q) = %q, %v; want %q, %v", tc.id, got, ok, tc.wantEpoch, tc.wantOK)
			}
		})
	}
	if escaped := url.PathEscape(id); escaped != id {
		t.Errorf("id %q escapes to %q in a URL; want it as it is", id, escaped)
	}
}

// loss is a store that loses its jobs: lose empties it as its kind does, and returns the store
// the gateway then reaches.
type loss struct {
	name  string
	store func(t *testing.T) (s store, lose func(t *testing.T) store)
}

func losses(opts Options) []loss {
	return []loss{
		{"memory: the gateway restarted", func(*testing.T) (store, func(*testing.T) store) {
			return NewMemory(opts), func(*testing.T) store { return NewMemory(opts) }
		}},
		{"redis: flushed", func(t *testing.T) (store, func(*testing.T) store) {
			srv := redisserver.Start(t)
			s := NewRedis(srv.Client(t), "test", opts)
			return s, func(t *testing.T) store {
				if err := srv.Client(t).FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
		{"redis: restarted without persistence", func(t *testing.T) (store, func(*testing.T) store) {
			srv := redisserver.Start(t)
			s := NewRedis(srv.Client(t), "test", opts)
			return s, func(*testing.T) store {
				srv.Kill()
				srv.Restart()
				return s
			}
		}},
		{"redis cluster: flushed", func(t *testing.T) (store, func(*testing.T) store) {
			c := redisserver.StartCluster(t)
			client := c.Client(t)
			s := NewRedis(client, "test", opts)
			return s, func(t *testing.T) store {
				err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
					return node.FlushAll(ctx).Err()
				})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
	}
}

// TestAJobItsStoreLostIsLost adds a job to a store that then loses it: the job is ErrLost, an
// id of the store's new epoch that it never gave is ErrNotFound, and a job added after the loss
// carries the new epoch and is found.
func TestAJobItsStoreLostIsLost(t *testing.T) {
	ctx := context.Background()
	for _, l := range losses(Options{ReclaimAfter: time.Hour}) {
		t.Run(l.name, func(t *testing.T) {
			s, lose := l.store(t)
			lost := add(t, s, "acme")
			s = lose(t)
			if _, err := s.Get(ctx, lost.ID); !errors.Is(err, ErrLost) || !errors.Is(err, ErrNotFound) {
				t.Errorf("Get() of the lost job: %v; want ErrLost, which is ErrNotFound too", err)
			}
			if _, err := s.Cancel(ctx, lost.ID); !errors.Is(err, ErrLost) {
				t.Errorf("Cancel() of the lost job: %v; want ErrLost", err)
			}
			after := add(t, s, "acme")
			before, _ := epochOf(lost.ID)
			now, ok := epochOf(after.ID)
			if !ok || now == before {
				t.Errorf("a job added after the loss has id %q, of epoch %q; want a new epoch, not %q", after.ID, now, before)
			}
			if got, err := s.Get(ctx, after.ID); err != nil || got.ID != after.ID {
				t.Errorf("Get() of the job added after the loss = %+v, %v; want it", got, err)
			}
			if _, err := s.Get(ctx, lost.ID); !errors.Is(err, ErrLost) {
				t.Errorf("Get() of the lost job once the store has a new epoch: %v; want ErrLost", err)
			}
			for _, id := range []string{newID(now), "job_nope"} {
				if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrLost) {
					t.Errorf("Get(%q), an id the store never gave: %v; want ErrNotFound, not ErrLost", id, err)
				}
			}
		})
	}
}

// TestRedisGatewaysAgreeOnANewEpoch has two gateways add jobs to a store that is then flushed:
// each adds again without having read anything since, and a gateway started after the loss adds
// too; all three name their new jobs under one new epoch.
func TestRedisGatewaysAgreeOnANewEpoch(t *testing.T) {
	srv := redisserver.Start(t)
	a, b := NewRedis(srv.Client(t), "a", Options{}), NewRedis(srv.Client(t), "b", Options{})
	old, _ := epochOf(add(t, a, "acme").ID)
	add(t, b, "acme")
	if err := srv.Client(t).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	var epochs []string
	for _, s := range []*Redis{a, b, NewRedis(srv.Client(t), "c", Options{})} {
		epoch, _ := epochOf(add(t, s, "acme").ID)
		epochs = append(epochs, epoch)
	}
	if epochs[0] == old || len(slices.Compact(slices.Clone(epochs))) != 1 {
		t.Errorf("after the flush the gateways' jobs are of epochs %v; want one new epoch, not %q", epochs, old)
	}
}

// TestRedisAJobRunningWhenItsStoreEmptiedIsLost takes a job, then flushes the store: every step
// of its attempt finds it lost, its renewal reports it, and nothing is left to take.
func TestRedisAJobRunningWhenItsStoreEmptiedIsLost(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Start(t)
	s := NewRedis(srv.Client(t), "test", Options{})
	add(t, s, "acme")
	j := takeOne(t, s)
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, j.Attempt(), Cost{Tokens: 100}); !errors.Is(err, ErrLost) || !Superseded(err) {
		t.Errorf("Hold() error = %v; want ErrLost, which supersedes the attempt", err)
	}
	if _, err := s.Charge(ctx, j.Attempt()); !errors.Is(err, ErrLost) {
		t.Errorf("Charge() error = %v; want ErrLost", err)
	}
	if lost, err := s.Renew(ctx); err != nil || !slices.Equal(lost, []string{j.ID}) {
		t.Errorf("Renew() = %v, %v; want the job no longer held", lost, err)
	}
	if _, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200, Result: []byte("{}")}); !errors.Is(err, ErrLost) {
		t.Errorf("Finish() error = %v; want ErrLost", err)
	}
	nothingToTake(t, s)
}
