package fairshare

import (
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
			l := New(2000, 0.5)
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
	l := New(2000, 0.5)
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
	l := New(2000, 0.5)
	// Before its first exchange, or after one failed, a gateway does not know who waits: no lane
	// starts, for one may wait on another gateway.
	for _, u := range l.Updates(map[Member]bool{TenantOf(light): true}) {
		if u.Starts {
			t.Errorf("before any exchange, %s starts; want none", u.Member)
		}
	}
	l.Took(nil, Standing{TenantOf(heavy): 5000, UserOf(heavy): 3000})
	l.Served(heavy)
	waiting := map[Member]bool{ClassOf(heavy): true, TenantOf(heavy): true, UserOf(heavy): true, TenantOf(light): true, UserOf(light): true}
	ups := l.Updates(waiting)
	want := []Update{
		{Member: ClassOf(heavy), Served: 2000, Starts: true, Ceiling: 2000, Waiting: true}, // 1,000 tokens over Interactive's share, 0.5; no class waited
		{Member: TenantOf(heavy), Served: 500, Waiting: true},
		{Member: UserOf(heavy), Served: 1000, Waiting: true},
		{Member: TenantOf(light), Starts: true, Floor: 5500, Ceiling: 7500, Waiting: true}, // no lower than heavy, what was served here included, nor the slack higher
		{Member: UserOf(light), Starts: true, Ceiling: 2000, Waiting: true},                // alone in its group
	}
	byMember := cmpopts.SortSlices(func(a, b Update) bool { return a.Member < b.Member })
	if diff := cmp.Diff(ups, want, byMember); diff != "" {
		t.Errorf("Updates mismatch (-got +want):\n%s", diff)
	}

	l.Took(ups, Standing{TenantOf(heavy): 5500, TenantOf(light): 5500})
	l.Served(light)
	got := l.Updates(map[Member]bool{TenantOf(heavy): true})
	want = []Update{
		{Member: TenantOf(heavy), Waiting: true},
		{Member: ClassOf(light), Served: 2000},
		{Member: TenantOf(light), Served: 1000}, // served, and no longer waiting here
		{Member: UserOf(light), Served: 1000},
		{Member: UserOf(heavy)}, // no longer waiting here
	}
	if diff := cmp.Diff(got, want, byMember); diff != "" {
		t.Errorf("Updates after a lane emptied mismatch (-got +want):\n%s", diff)
	}
}

func TestForgetHoldsNothingAndKeepsWhatWasServed(t *testing.T) {
	l := New(0, 0.5)
	l.Took(nil, Standing{TenantOf(heavy): 0, TenantOf(light): 0})
	l.Served(light)
	if !l.Held(light) {
		t.Fatal("light, served past the slack, is not held")
	}
	l.Forget()
	if l.Held(light) {
		t.Error("light is held after the ledger was forgotten; want nothing held")
	}
	ups := l.Updates(nil)
	if diff := cmp.Diff(ups, []Update{{Member: ClassOf(light), Served: 2000}, {Member: TenantOf(light), Served: 1000}, {Member: UserOf(light), Served: 1000}},
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
	} {
		if got := tc.m.group(); got != tc.want {
			t.Errorf("%q.group() = %q; want %q", tc.m, got, tc.want)
		}
	}
}
