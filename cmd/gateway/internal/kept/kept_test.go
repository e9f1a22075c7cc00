package kept

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// now is the tests' time for holds: the stores take it from their callers.
var now = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

var (
	acme   = Owner{Tenant: "acme", TenantID: "uid-acme", Provider: "openai", Context: 1200}
	globex = Owner{Tenant: "globex", TenantID: "uid-globex", Provider: "openai"}
)

// stores returns, by kind, a function that returns an empty store of that kind. The Redis kinds
// share one server, or one cluster, emptied for each store.
func stores(t *testing.T) map[string]func(t *testing.T) Store {
	out := map[string]func(*testing.T) Store{"memory": func(*testing.T) Store { return NewMemory() }}
	if testing.Short() {
		return out
	}
	one := redisserver.Start(t).Client(t)
	out["redis"] = func(t *testing.T) Store {
		if err := one.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return NewRedis(one)
	}
	cluster := redisserver.StartCluster(t).Client(t)
	out["redis cluster"] = func(t *testing.T) Store {
		err := cluster.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			return node.FlushAll(ctx).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return NewRedis(cluster)
	}
	return out
}

func TestStores(t *testing.T) {
	behaviours := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"owners are answered in the order asked, nil for ids not recorded", ownersInOrder},
		{"an owner expires after its ttl, and owning again renews it", ownerExpires},
		{"a forgotten owner is not answered", forgotten},
		{"what cannot be recorded is refused", refused},
		{"a follow is answered as recorded, and recording it again replaces it", followed},
		{"a hold is extended only by its holder, never shortened", heldByItsHolder},
		{"a claim takes only lapsed follows, those that lapsed first first", claimsLapsed},
		{"a finished follow is gone, and only its first finish is told so", finishedOnce},
		{"gateways claiming at once each take a follow no other takes", claimsRace},
		{"gateways finishing at once: one is told true per follow", finishesRace},
	}
	kinds := stores(t)
	for _, b := range behaviours {
		for kind, open := range kinds {
			t.Run(kind+"/"+b.name, func(t *testing.T) { b.run(t, open(t)) })
		}
	}
}

func own(t *testing.T, s Store, o Owner, ttl time.Duration, ids ...string) {
	t.Helper()
	if err := s.Own(context.Background(), o, ttl, ids...); err != nil {
		t.Fatalf("Own(%s, %s, %q) error = %v", o.Tenant, ttl, ids, err)
	}
}

func owners(t *testing.T, s Store, ids ...string) []*Owner {
	t.Helper()
	got, err := s.Owners(context.Background(), ids...)
	if err != nil {
		t.Fatalf("Owners(%q) error = %v", ids, err)
	}
	return got
}

func ownersInOrder(t *testing.T, s Store) {
	own(t, s, acme, time.Hour, "resp_a", "msg_a")
	own(t, s, globex, time.Hour, "conv_g")
	got := owners(t, s, "msg_a", "resp_unknown", "conv_g", "", "resp_a")
	want := []*Owner{&acme, nil, &globex, nil, &acme}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Owners() (-want +got):\n%s", diff)
	}
	if got := owners(t, s); len(got) != 0 {
		t.Errorf("Owners() of no id = %v; want none", got)
	}
	if got := owners(t, s, ""); len(got) != 1 || got[0] != nil {
		t.Errorf(`Owners("") = %v; want [nil]`, got)
	}
}

func ownerExpires(t *testing.T, s Store) {
	own(t, s, acme, 50*time.Millisecond, "resp_renewed", "resp_expires")
	own(t, s, globex, time.Hour, "resp_renewed")
	poll.Until(t, 10*time.Second, "the owner of resp_expires to expire", func() bool {
		return owners(t, s, "resp_expires")[0] == nil
	})
	if diff := cmp.Diff([]*Owner{&globex}, owners(t, s, "resp_renewed")); diff != "" {
		t.Errorf("the owner of an id owned again (-want +got):\n%s", diff)
	}
}

func forgotten(t *testing.T, s Store) {
	own(t, s, acme, time.Hour, "file-a", "vs_a")
	if err := s.Forget(context.Background(), "file-a", "", "file-unknown"); err != nil {
		t.Fatalf("Forget() error = %v", err)
	}
	if diff := cmp.Diff([]*Owner{nil, &acme}, owners(t, s, "file-a", "vs_a")); diff != "" {
		t.Errorf("Owners() after Forget (-want +got):\n%s", diff)
	}
}

func refused(t *testing.T, s Store) {
	ctx := context.Background()
	cases := []struct {
		name string
		err  error
	}{
		{"an empty id", s.Own(ctx, acme, time.Hour, "resp_a", "")},
		{"a ttl of zero", s.Own(ctx, acme, 0, "resp_a")},
		{"a negative ttl", s.Own(ctx, acme, -time.Second, "resp_a")},
		{"an owner without a tenant id", s.Own(ctx, Owner{Tenant: "acme"}, time.Hour, "resp_a")},
		{"a follow without an id", s.Follow(ctx, Follow{Holder: "gw-1"})},
		{"a follow without a holder", s.Follow(ctx, Follow{ID: "resp_a"})},
		{"a hold without a holder", func() error { _, err := s.Hold(ctx, "", now, "resp_a"); return err }()},
		{"a claim without a holder", func() error { _, err := s.Claim(ctx, "", now, now, 1); return err }()},
	}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error; want one", tc.name)
		}
	}
	if got := owners(t, s, "resp_a"); got[0] != nil {
		t.Errorf("Owners() after refusals = %+v; want nil", got[0])
	}
	if got := followedOf(t, s, "resp_a"); got != nil {
		t.Errorf("Followed() after refusals = %+v; want nil", got)
	}
}

// background returns the follow of id held by holder until heldUntil.
func background(id, holder string, heldUntil time.Time) Follow {
	return Follow{
		ID: id, Provider: "openai", Model: "gpt-5", Endpoint: "responses", KeyHash: "9f86d081",
		Tenant: "acme", TenantID: "uid-acme", User: "alice", Lease: "lease-" + id, Took: now.Add(-time.Minute),
		Tokens: 4000, MicroDollars: 123456789012345, ProviderTokens: 4100, PromptBound: 1000, CompletionBound: 3000,
		Started: now.Add(-time.Minute), Until: now.Add(time.Hour), Holder: holder, HeldUntil: heldUntil,
	}
}

func follow(t *testing.T, s Store, f Follow) {
	t.Helper()
	if err := s.Follow(context.Background(), f); err != nil {
		t.Fatalf("Follow(%s) error = %v", f.ID, err)
	}
}

func followedOf(t *testing.T, s Store, id string) *Follow {
	t.Helper()
	f, err := s.Followed(context.Background(), id)
	if err != nil {
		t.Fatalf("Followed(%s) error = %v", id, err)
	}
	return f
}

func hold(t *testing.T, s Store, holder string, until time.Time, ids ...string) []string {
	t.Helper()
	lost, err := s.Hold(context.Background(), holder, until, ids...)
	if err != nil {
		t.Fatalf("Hold(%s, %q) error = %v", holder, ids, err)
	}
	return lost
}

func claim(t *testing.T, s Store, holder string, at, until time.Time, n int) []Follow {
	t.Helper()
	claimed, err := s.Claim(context.Background(), holder, at, until, n)
	if err != nil {
		t.Fatalf("Claim(%s) error = %v", holder, err)
	}
	return claimed
}

func finish(t *testing.T, s Store, id string) bool {
	t.Helper()
	removed, err := s.Finish(context.Background(), id)
	if err != nil {
		t.Fatalf("Finish(%s) error = %v", id, err)
	}
	return removed
}

func followed(t *testing.T, s Store) {
	f := background("resp_1", "gw-1", now.Add(1500*time.Microsecond))
	follow(t, s, f)
	want := f
	want.HeldUntil = now.Add(time.Millisecond) // kept to the millisecond
	if diff := cmp.Diff(&want, followedOf(t, s, "resp_1")); diff != "" {
		t.Errorf("Followed() (-want +got):\n%s", diff)
	}
	if got := followedOf(t, s, "resp_unknown"); got != nil {
		t.Errorf("Followed() of an id not followed = %+v; want nil", got)
	}

	again := background("resp_1", "gw-2", now.Add(time.Minute))
	again.Tokens = 1
	follow(t, s, again)
	if diff := cmp.Diff(&again, followedOf(t, s, "resp_1")); diff != "" {
		t.Errorf("Followed() after recording it again (-want +got):\n%s", diff)
	}
}

func heldByItsHolder(t *testing.T, s Store) {
	follow(t, s, background("resp_mine", "gw-1", now))
	follow(t, s, background("resp_theirs", "gw-2", now))
	later := now.Add(30 * time.Second)
	lost := hold(t, s, "gw-1", later, "resp_mine", "resp_theirs", "resp_unknown")
	if diff := cmp.Diff([]string{"resp_theirs", "resp_unknown"}, lost); diff != "" {
		t.Errorf("Hold() lost (-want +got):\n%s", diff)
	}
	if got := followedOf(t, s, "resp_mine"); got.Holder != "gw-1" || !got.HeldUntil.Equal(later) {
		t.Errorf("the hold of resp_mine is %s's until %s; want gw-1's until %s", got.Holder, got.HeldUntil, later)
	}
	if got := followedOf(t, s, "resp_theirs"); got.Holder != "gw-2" || !got.HeldUntil.Equal(now) {
		t.Errorf("the hold of resp_theirs is %s's until %s; want gw-2's until %s, unchanged", got.Holder, got.HeldUntil, now)
	}

	if lost := hold(t, s, "gw-1", now, "resp_mine"); lost != nil {
		t.Errorf("Hold() to an earlier time lost %q; want none", lost)
	}
	if got := followedOf(t, s, "resp_mine"); !got.HeldUntil.Equal(later) {
		t.Errorf("a hold to an earlier time moved it to %s; want it at %s", got.HeldUntil, later)
	}
	if lost := hold(t, s, "gw-1", later); lost != nil {
		t.Errorf("Hold() of no id lost %q; want none", lost)
	}
}

func claimsLapsed(t *testing.T, s Store) {
	for i, heldUntil := range []time.Time{now.Add(-time.Second), now.Add(-3 * time.Second), now, now.Add(-2 * time.Second), now.Add(time.Hour)} {
		follow(t, s, background(fmt.Sprintf("resp_%d", i), "gw-dead", heldUntil))
	}
	until := now.Add(30 * time.Second)
	if diff := cmp.Diff([]string{"resp_1", "resp_3"}, idsOf(claim(t, s, "gw-1", now, until, 2))); diff != "" {
		t.Errorf("the first claim took (-want +got):\n%s", diff)
	}
	claimed := claim(t, s, "gw-2", now, until, 10)
	want := background("resp_0", "gw-2", until)
	if diff := cmp.Diff([]Follow{want}, claimed); diff != "" {
		t.Errorf("the second claim (-want +got):\n%s", diff)
	}
	if got := followedOf(t, s, "resp_0"); got.Holder != "gw-2" || !got.HeldUntil.Equal(until) {
		t.Errorf("a claimed follow is %s's until %s; want gw-2's until %s", got.Holder, got.HeldUntil, until)
	}
	if got := claim(t, s, "gw-3", now, until, 10); len(got) != 0 {
		t.Errorf("a claim with nothing lapsed took %q; want none", idsOf(got))
	}
	if got := claim(t, s, "gw-3", now.Add(time.Minute), until, 0); len(got) != 0 {
		t.Errorf("a claim of at most 0 took %q; want none", idsOf(got))
	}
	lost := hold(t, s, "gw-dead", now.Add(time.Hour), "resp_0", "resp_1", "resp_2", "resp_3", "resp_4")
	if diff := cmp.Diff([]string{"resp_0", "resp_1", "resp_3"}, lost); diff != "" {
		t.Errorf("the dead gateway's Hold() lost (-want +got):\n%s", diff)
	}
}

func idsOf(follows []Follow) []string {
	var out []string
	for _, f := range follows {
		out = append(out, f.ID)
	}
	return out
}

func finishedOnce(t *testing.T, s Store) {
	follow(t, s, background("resp_done", "gw-1", now.Add(-time.Minute)))
	if !finish(t, s, "resp_done") {
		t.Error("the first Finish() = false; want true")
	}
	if finish(t, s, "resp_done") {
		t.Error("the second Finish() = true; want false")
	}
	if finish(t, s, "resp_unknown") {
		t.Error("Finish() of an id not followed = true; want false")
	}
	if got := followedOf(t, s, "resp_done"); got != nil {
		t.Errorf("Followed() after Finish = %+v; want nil", got)
	}
	if got := claim(t, s, "gw-2", now, now.Add(time.Minute), 10); len(got) != 0 {
		t.Errorf("a claim after Finish took %q; want none", idsOf(got))
	}
	if lost := hold(t, s, "gw-1", now, "resp_done"); len(lost) != 1 {
		t.Errorf("Hold() of a finished follow lost %q; want it", lost)
	}
}

// gateways is how many gateways race in the concurrency tests.
const gateways = 8

func claimsRace(t *testing.T, s Store) {
	const follows = 100
	for i := range follows {
		follow(t, s, background(fmt.Sprintf("resp_%03d", i), "gw-dead", now.Add(-time.Minute)))
	}
	var mu sync.Mutex
	claimedBy := map[string][]string{}
	var wg sync.WaitGroup
	for g := range gateways {
		holder := fmt.Sprintf("gw-%d", g)
		wg.Go(func() {
			for range follows + 1 { // each claim but the last takes one at least
				claimed, err := s.Claim(context.Background(), holder, now, now.Add(time.Hour), 7)
				if err != nil {
					t.Errorf("Claim(%s) error = %v", holder, err)
					return
				}
				if len(claimed) == 0 {
					return
				}
				mu.Lock()
				for _, f := range claimed {
					claimedBy[f.ID] = append(claimedBy[f.ID], holder)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimedBy) != follows {
		t.Errorf("%d follows claimed; want %d", len(claimedBy), follows)
	}
	for id, holders := range claimedBy {
		if len(holders) != 1 {
			t.Errorf("%s claimed by %q; want one gateway", id, holders)
		}
		if got := followedOf(t, s, id); got.Holder != holders[0] {
			t.Errorf("%s is held by %s; want %s, which claimed it", id, got.Holder, holders[0])
		}
	}
}

func finishesRace(t *testing.T, s Store) {
	const follows = 50
	for i := range follows {
		follow(t, s, background(fmt.Sprintf("resp_%03d", i), "gw-dead", now))
	}
	var removals [follows]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range gateways {
		wg.Go(func() {
			for i := range follows {
				removed, err := s.Finish(context.Background(), fmt.Sprintf("resp_%03d", i))
				if err != nil {
					t.Errorf("Finish() error = %v", err)
					return
				}
				if removed {
					mu.Lock()
					removals[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, n := range removals {
		if n != 1 {
			t.Errorf("resp_%03d: %d gateways were told they finished it; want 1", i, n)
		}
	}
}
