package redisstore

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestSharesExchange runs two gateways' exchanges on a real Redis: what each served adds up, a
// floor raises a lane's count, and a lane counts as waiting while some gateway says it waits.
func TestSharesExchange(t *testing.T) {
	client := redisserver.Start(t).Client(t)
	ctx := context.Background()
	a, b := NewShares(client, "gw-a"), NewShares(client, "gw-b")
	exchange := func(s *Shares, ups ...fairshare.Update) fairshare.Standing {
		t.Helper()
		st, err := s.Exchange(ctx, "lab", ups)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const heavy, light fairshare.Member = "0\x1fheavy", "0\x1flight"
	exchange(a, fairshare.Update{Member: heavy, Served: 1500, Waiting: true})
	got := exchange(b, fairshare.Update{Member: heavy, Served: 500.5, Waiting: true}, fairshare.Update{Member: light, Floor: 1000, Waiting: true})
	if diff := cmp.Diff(got, fairshare.Standing{heavy: 2000.5, light: 1000}); diff != "" {
		t.Errorf("after both exchanged (-got +want):\n%s", diff)
	}
	got = exchange(a, fairshare.Update{Member: heavy}, fairshare.Update{Member: light, Floor: 5000, Served: 10, Waiting: true})
	if diff := cmp.Diff(got, fairshare.Standing{heavy: 2000.5, light: 5010}); diff != "" {
		t.Errorf("heavy still waiting on b, light floored (-got +want):\n%s", diff)
	}
	got = exchange(b, fairshare.Update{Member: heavy}, fairshare.Update{Member: light})
	if diff := cmp.Diff(got, fairshare.Standing{light: 5010}); diff != "" {
		t.Errorf("heavy waiting nowhere (-got +want):\n%s", diff)
	}
	if other := exchange(a); len(other) != 1 {
		t.Errorf("an exchange of nothing = %v; want light alone", other)
	}
	if st, err := a.Exchange(ctx, "other", nil); err != nil || len(st) != 0 {
		t.Errorf("another provider's shares = %v, %v; want none", st, err)
	}
}
