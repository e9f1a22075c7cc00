package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestSharesExchange runs two gateways' exchanges on a real Redis: what each served adds up, a
// lane that starts waiting starts at what it counted before brought within its floor and ceiling
// (at its floor when it counted nothing), and a lane counts as waiting while some gateway says it
// waits.
func TestSharesExchange(t *testing.T) {
	client := redisserver.Start(t).Client(t)
	ctx := context.Background()
	a, b := NewShares(client, "gw-a"), NewShares(client, "gw-b")
	exchange := func(s *Shares, ups ...fairshare.Update) fairshare.Standing {
		t.Helper()
		st, _, err := s.Exchange(ctx, "lab", ups, fairqueue.Backlog{}, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const heavy, light fairshare.Member = "0\x1fheavy", "0\x1flight"
	exchange(a, fairshare.Update{Member: heavy, Served: 1500, Waiting: true})
	got := exchange(b, fairshare.Update{Member: heavy, Served: 500.5, Waiting: true}, fairshare.Update{Member: light, Starts: true, Floor: 1000, Ceiling: 3000, Waiting: true})
	if diff := gocmp.Diff(got, fairshare.Standing{heavy: 2000.5, light: 1000}); diff != "" {
		t.Errorf("after both exchanged, light new at its floor (-got +want):\n%s", diff)
	}
	got = exchange(a, fairshare.Update{Member: heavy}, fairshare.Update{Member: light, Starts: true, Floor: 5000, Ceiling: 7000, Served: 10, Waiting: true})
	if diff := gocmp.Diff(got, fairshare.Standing{heavy: 2000.5, light: 5010}); diff != "" {
		t.Errorf("heavy still waiting on b, light brought up to its floor (-got +want):\n%s", diff)
	}
	// heavy, served much while it waited, stops waiting, then starts again: no further ahead of
	// light than the ceiling, then where it was when it is within it.
	exchange(b, fairshare.Update{Member: heavy, Served: 9000})
	got = exchange(b, fairshare.Update{Member: heavy, Starts: true, Floor: 5010, Ceiling: 7010, Waiting: true})
	if diff := gocmp.Diff(got, fairshare.Standing{heavy: 7010, light: 5010}); diff != "" {
		t.Errorf("heavy back after it stopped waiting, far ahead (-got +want):\n%s", diff)
	}
	exchange(b, fairshare.Update{Member: heavy, Served: 500})
	got = exchange(b, fairshare.Update{Member: heavy, Starts: true, Floor: 5010, Ceiling: 9010, Waiting: true})
	if diff := gocmp.Diff(got, fairshare.Standing{heavy: 7510, light: 5010}); diff != "" {
		t.Errorf("heavy back again within its ceiling (-got +want):\n%s", diff)
	}
	got = exchange(b, fairshare.Update{Member: heavy}, fairshare.Update{Member: light, Served: 1, Waiting: true})
	got = exchange(b, fairshare.Update{Member: heavy}, fairshare.Update{Member: light})
	if diff := gocmp.Diff(got, fairshare.Standing{light: 5011}); diff != "" {
		t.Errorf("heavy waiting nowhere (-got +want):\n%s", diff)
	}
	if other := exchange(a); len(other) != 1 {
		t.Errorf("an exchange of nothing = %v; want light alone", other)
	}
	if st, _, err := a.Exchange(ctx, "other", nil, fairqueue.Backlog{}, 2*time.Second); err != nil || len(st) != 0 {
		t.Errorf("another provider's shares = %v, %v; want none", st, err)
	}
}

// TestSharesExchangeBacklogs runs three gateways' exchanges on a real Redis: each hears what waits
// on the others, not its own; a gateway that reports nothing waiting is heard no more, and one
// whose word ran out is forgotten.
func TestSharesExchangeBacklogs(t *testing.T) {
	client := redisserver.Start(t).Client(t)
	ctx := context.Background()
	a, b, c := NewShares(client, "gw-a"), NewShares(client, "gw-b"), NewShares(client, "gw-c")
	exchange := func(s *Shares, mine fairqueue.Backlog, ttl time.Duration) []fairqueue.Backlog {
		t.Helper()
		_, others, err := s.Exchange(ctx, "lab", nil, mine, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return others
	}
	busy := fairqueue.Backlog{Lanes: 2, Queued: fairqueue.Load{Calls: 5, Tokens: 4000}}
	busy.Expected[3] = fairqueue.Load{Calls: 1, Tokens: 800}
	long := fairqueue.Backlog{Lanes: 1, Queued: fairqueue.Load{Calls: 1, Tokens: 20_000}}
	exchange(a, busy, time.Minute)
	exchange(b, long, time.Minute)
	got := exchange(c, fairqueue.Backlog{Lanes: 3, Queued: fairqueue.Load{Calls: 3, Tokens: 2400}}, 50*time.Millisecond)
	sortBacklogs(got)
	if diff := gocmp.Diff(got, []fairqueue.Backlog{long, busy}); diff != "" {
		t.Errorf("c hears a and b (-got +want):\n%s", diff)
	}
	exchange(b, fairqueue.Backlog{}, time.Minute)
	time.Sleep(100 * time.Millisecond) // c's word runs out
	got = exchange(a, busy, time.Minute)
	if len(got) != 0 {
		t.Errorf("a hears %v; want nothing once b has nothing waiting and c's word ran out", got)
	}
}

// sortBacklogs orders backlogs by their tokens, most first.
func sortBacklogs(backlogs []fairqueue.Backlog) {
	slices.SortFunc(backlogs, func(x, y fairqueue.Backlog) int { return cmp.Compare(y.Queued.Tokens, x.Queued.Tokens) })
}

// BenchmarkSharesExchangeAtScale is one gateway's exchange while 5,000 tenants of one user each
// wait on two gateways: 10,001 lanes (the class, each tenant, each user) reported and answered.
func BenchmarkSharesExchangeAtScale(b *testing.B) {
	client := redisserver.Start(b).Client(b)
	ctx := context.Background()
	const tenants = 5000
	ups := []fairshare.Update{{Member: fairshare.Member("classes\x1f0"), Served: 1000, Waiting: true}}
	for i := range tenants {
		tenant := fairshare.Member(fmt.Sprintf("0\x1ftenant-%05d", i))
		ups = append(ups, fairshare.Update{Member: tenant, Served: 10, Waiting: true}, fairshare.Update{Member: tenant + "\x1fuser", Served: 10, Waiting: true})
	}
	other := NewShares(client, "gw-b")
	if _, _, err := other.Exchange(ctx, "lab", ups, fairqueue.Backlog{}, 2*time.Second); err != nil {
		b.Fatal(err)
	}
	s := NewShares(client, "gw-a")
	b.ResetTimer()
	for b.Loop() {
		st, _, err := s.Exchange(ctx, "lab", ups, fairqueue.Backlog{}, 2*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if len(st) != len(ups) {
			b.Fatalf("the standing has %d lanes; want %d", len(st), len(ups))
		}
	}
}
