package fairshare

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
)

func item(tenant, user string, weight int32, cost int64) *fairqueue.Item {
	return &fairqueue.Item{Tenant: tenant, User: user, Weight: weight, Cost: cost}
}

var (
	heavy = item("heavy", "h0", 2, 1000)
	light = item("light", "l0", 1, 1000)
	other = item("light", "l1", 1, 1000)
	batch = &fairqueue.Item{Tenant: "nightly", User: "n0", Weight: 1, Class: fairqueue.Batch, Cost: 1000}
)

func TestHeldByGroup(t *testing.T) {
	tests := []struct {
		name     string
		standing Standing
		served   []*fairqueue.Item // here since the exchange
		it       *fairqueue.Item
		want     bool
	}{{
		name: "alone, nothing is held",
		it:   light,
	}, {
		name:     "a tenant level with the others goes",
		standing: Standing{TenantOf(heavy): 5000, TenantOf(light): 5000},
		it:       light,
	}, {
		name:     "a tenant more than the slack ahead of the least waits",
		standing: Standing{TenantOf(heavy): 5000, TenantOf(light): 7001},
		it:       light,
		want:     true,
	}, {
		name:     "what this gateway served since the exchange counts, over the weight",
		standing: Standing{TenantOf(heavy): 5000, TenantOf(light): 5000},
		served:   []*fairqueue.Item{heavy, heavy, heavy, heavy, heavy}, // 2,500 over weight 2
		it:       heavy,
		want:     true,
	}, {
		name:     "a user ahead of another user of its tenant waits",
		standing: Standing{TenantOf(light): 5000, UserOf(light): 9000, UserOf(other): 6000},
		it:       light,
		want:     true,
	}, {
		name:     "users of other tenants are not compared",
		standing: Standing{TenantOf(light): 5000, TenantOf(heavy): 5000, UserOf(light): 9000, UserOf(heavy): 1000},
		it:       light,
	}, {
		name:     "Batch past its share of what Interactive was served waits",
		standing: Standing{ClassOf(light): 10_000, ClassOf(batch): 12_001, TenantOf(batch): 0},
		it:       batch,
		want:     true,
	}, {
		name:     "Interactive past Batch's share waits, so Batch keeps it",
		standing: Standing{ClassOf(light): 12_001, ClassOf(batch): 10_000, TenantOf(light): 0},
		it:       light,
		want:     true,
	}, {
		name:     "a lane nobody waited for is level with the least of its group",
		standing: Standing{TenantOf(heavy): 5000},
		it:       light,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New(2000, 0.5, "here", nil)
			l.Took(nil, tc.standing)
			for _, it := range tc.served {
				l.Served(it)
			}
			if got := l.Held(tc.it); got != tc.want {
				t.Errorf("Held = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestHeldFollowsWhatIsServedBetweenExchanges asks Held, serves the least served lane past the
// one held, and asks again: the held lane goes, whatever Held answered before.
func TestHeldFollowsWhatIsServedBetweenExchanges(t *testing.T) {
	l := New(2000, 0.5, "here", nil)
	l.Took(nil, Standing{TenantOf(heavy): 5000, TenantOf(light): 7001})
	if !l.Held(light) {
		t.Fatal("light, 2,001 ahead of heavy: not held; want held")
	}
	for range 5 {
		l.Served(heavy) // 2,500 over weight 2: heavy counts 7,500
	}
	if l.Held(light) {
		t.Error("light, 499 behind heavy once heavy was served: held; want not held")
	}
}

func TestUpdatesReportServiceWaitingAndFloors(t *testing.T) {
	l := New(2000, 0.5, "here", nil)
	// Before its first exchange, or after one failed, a gateway does not know who waits: no lane
	// starts, for one may wait on another gateway.
	for _, u := range l.Updates(map[Member]bool{TenantOf(light): true}, 0) {
		if u.Starts {
			t.Errorf("before any exchange, %s starts; want none", u.Member)
		}
	}
	l.Took(nil, Standing{TenantOf(heavy): 5000, UserOf(heavy): 3000})
	l.Served(heavy)
	waiting := map[Member]bool{ClassOf(heavy): true, TenantOf(heavy): true, UserOf(heavy): true, TenantOf(light): true, UserOf(light): true}
	ups := l.Updates(waiting, 0)
	want := []Update{
		{Member: ClassOf(heavy), Served: 2000, Starts: true, Ceiling: 2000, Waiting: true}, // 1,000 tokens over Interactive's share, 0.5; no class waited
		{Member: TenantOf(heavy), Served: 500, Waiting: true},
		{Member: UserOf(heavy), Served: 1000, Waiting: true},
		{Member: TenantOf(light), Starts: true, Floor: 5500, Ceiling: 7500, Waiting: true}, // no lower than heavy, what was served here included, nor the slack higher
		{Member: UserOf(light), Starts: true, Ceiling: 2000, Waiting: true},                // alone in its group
		{Member: GatewayOf("here"), Served: 1000},                                          // owed no share yet: over all of it
	}
	byMember := cmpopts.SortSlices(func(a, b Update) bool { return a.Member < b.Member })
	if diff := cmp.Diff(ups, want, byMember); diff != "" {
		t.Errorf("Updates mismatch (-got +want):\n%s", diff)
	}

	l.Took(ups, Standing{TenantOf(heavy): 5500, TenantOf(light): 5500})
	l.Served(light)
	got := l.Updates(map[Member]bool{TenantOf(heavy): true}, 0)
	want = []Update{
		{Member: TenantOf(heavy), Waiting: true},
		{Member: ClassOf(light), Served: 2000},
		{Member: TenantOf(light), Served: 1000}, // served, and no longer waiting here
		{Member: UserOf(light), Served: 1000},
		{Member: UserOf(heavy)}, // no longer waiting here
		{Member: GatewayOf("here"), Served: 1000},
	}
	if diff := cmp.Diff(got, want, byMember); diff != "" {
		t.Errorf("Updates after a lane emptied mismatch (-got +want):\n%s", diff)
	}
}

func TestForgetHoldsNothingAndKeepsWhatWasServed(t *testing.T) {
	l := New(0, 0.5, "here", nil)
	l.Took(nil, Standing{TenantOf(heavy): 0, TenantOf(light): 0})
	l.Served(light)
	if !l.Held(light) {
		t.Fatal("light, served past the slack, is not held")
	}
	l.Forget()
	if l.Held(light) {
		t.Error("light is held after the ledger was forgotten; want nothing held")
	}
	ups := l.Updates(nil, 0)
	if diff := cmp.Diff(ups, []Update{{Member: ClassOf(light), Served: 2000}, {Member: TenantOf(light), Served: 1000}, {Member: UserOf(light), Served: 1000}, {Member: GatewayOf("here"), Served: 1000}},
		cmpopts.SortSlices(func(a, b Update) bool { return a.Member < b.Member })); diff != "" {
		t.Errorf("Updates after Forget mismatch (-got +want):\n%s", diff)
	}
}

func TestMemberGroups(t *testing.T) {
	for _, tc := range []struct {
		m    Member
		want string
	}{
		{ClassOf(heavy), "classes"},
		{TenantOf(heavy), "0"},
		{UserOf(heavy), "0\x1fheavy"},
		{UserOf(item("t", "a\x1fb", 1, 1)), "0\x1ft"},
		{GatewayOf("here"), "gateways"},
	} {
		if got := tc.m.group(); got != tc.want {
			t.Errorf("%q.group() = %q; want %q", tc.m, got, tc.want)
		}
	}
}

// TestAGatewayAheadOfItsShareIsHeld serves a gateway owed half the provider: what it serves counts
// twice, and once it is more than the slack ahead of another gateway that has a lane to serve,
// every lane of its own is held; not when no other gateway has one.
func TestAGatewayAheadOfItsShareIsHeld(t *testing.T) {
	l := New(2000, 0.5, "here", nil)
	standing := Standing{GatewayOf("here"): 5000, GatewayOf("there"): 5000, TenantOf(heavy): 0, UserOf(heavy): 0}
	l.Took(l.Updates(map[Member]bool{TenantOf(heavy): true, UserOf(heavy): true}, 0.5), standing)
	l.Served(heavy) // 1,000 tokens over half the provider: 7,000
	if l.Held(heavy) {
		t.Fatal("here, 2,000 ahead of there: held; want not held, within the slack")
	}
	l.Served(heavy)
	if !l.Held(heavy) {
		t.Fatal("here, 4,000 ahead of there: not held; want held")
	}
	delete(standing, GatewayOf("there"))
	l.Took(nil, standing)
	if l.Held(heavy) {
		t.Error("here, with no other gateway owed a lane: held; want not held")
	}
}

// TestAGatewayHasASlackOfItsOwn checks that a gateway is held back once it is more than the
// gateways' slack ahead of the least served gateway, however far within their own slack its lanes
// are.
func TestAGatewayHasASlackOfItsOwn(t *testing.T) {
	l := New(8000, 0.5, "here", nil)
	l.SetGatewaySlack(1500)
	standing := Standing{GatewayOf("here"): 5000, GatewayOf("there"): 5000, TenantOf(heavy): 0, UserOf(heavy): 0}
	l.Took(l.Updates(map[Member]bool{TenantOf(heavy): true, UserOf(heavy): true}, 0.5), standing)
	l.Served(heavy) // 1,000 tokens over half the provider: 2,000 ahead of there
	if !l.Held(heavy) {
		t.Error("here, 2,000 ahead of there with a gateways' slack of 1,500: not held; want held")
	}
	if l.laneHeld(heavy) {
		t.Error("heavy, 1,000 served within a lanes' slack of 8,000: its lane held; want only its gateway")
	}
}

// TestAGatewayStartsLevelWithTheLeastServed checks that a gateway whose lanes come to be owed a
// share starts at the least served gateway's count, not within the slack above it, as a lane does:
// it owes nothing for the time it had nothing to serve.
func TestAGatewayStartsLevelWithTheLeastServed(t *testing.T) {
	l := New(2000, 0.5, "here", nil)
	l.Took(nil, Standing{GatewayOf("there"): 5000, TenantOf(heavy): 0, UserOf(heavy): 0})
	for _, u := range l.Updates(map[Member]bool{TenantOf(heavy): true, UserOf(heavy): true}, 0.5) {
		if u.Member == GatewayOf("here") && (!u.Starts || u.Floor != 5000 || u.Ceiling != 5000) {
			t.Errorf("this gateway's update = %+v; want it to start at 5,000, the least served gateway's count", u)
		}
	}
}

// TestOwedSplitsTheProviderByClassTenantAndUser checks the share of the provider owed to a user's
// lane: its class's share while the other class waits, its tenant's weight among its class's
// tenants waiting, split among its tenant's users waiting; none for a lane held back.
func TestOwedSplitsTheProviderByClassTenantAndUser(t *testing.T) {
	weights := map[string]int32{"heavy": 2, "light": 1, "nightly": 1}
	l := New(2000, 0.1, "here", func(tenant string) int32 { return weights[tenant] })
	l.Took(nil, Standing{ClassOf(heavy): 0, ClassOf(batch): 0, TenantOf(heavy): 0, TenantOf(light): 0, TenantOf(batch): 0,
		UserOf(heavy): 0, UserOf(item("heavy", "h1", 2, 1000)): 0, UserOf(light): 0, UserOf(batch): 0})
	cases := []struct {
		name string
		it   *fairqueue.Item
		want float64
	}{
		{"heavy's h0: 0.9 × 2/3 × 1/2", heavy, 0.3},
		{"light's l0: 0.9 × 1/3", light, 0.3},
		{"light's l1, not known to wait yet: 0.9 × 1/3 × 1/2", other, 0.15},
		{"nightly's n0: Batch's 0.1", batch, 0.1},
	}
	for _, tc := range cases {
		if got := l.Owed(tc.it); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Owed = %v; want %v", tc.name, got, tc.want)
		}
	}
	for range 3 {
		l.Served(light)
	}
	if got := l.Owed(light); got != 0 {
		t.Errorf("Owed(light) served past the slack = %v; want 0: held back", got)
	}
}
