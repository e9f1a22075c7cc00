package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// recordStore is a store with the record's operations.
type recordStore interface {
	store
	Reseed(ctx context.Context, mk *Limit, version int64, seeds []Seed, now time.Time) (bool, error)
	Snapshot(ctx context.Context, mk *Limit, version int64, windows []*Limit, now time.Time) (ScopeState, error)
}

// recordScope is a tenant's scope: a day's quota of requests, a month's budget, and its mark.
type recordScope struct {
	mark, day, month *Limit
}

func newRecordScope() recordScope {
	return recordScope{
		mark:  NewMark("{tenant:acme}:record", LevelTenant),
		day:   mustLimit(NewWindow("{tenant:acme}:tenant:requests:day", LevelTenant, Requests, 100, Calendar{Period: Day})),
		month: mustLimit(NewWindow("{tenant:acme}:tenant:budget", LevelTenant, MicroDollars, 1000, Calendar{Period: Month})),
	}
}

// checks are a call's checks on the scope: one request, 10 micro-dollars, and the mark at the
// record's version.
func (s recordScope) checks(version int64) []Check {
	return []Check{{Limit: s.day, Cost: 1}, {Limit: s.month, Cost: 10}, {Limit: s.mark, Cost: version}}
}

func runRecordCase(t *testing.T, newStore func(t *testing.T) recordStore) {
	ctx := context.Background()
	sc := newRecordScope()
	_, dayEnd := sc.day.calendar.Bounds(t0)
	_, monthEnd := sc.month.calendar.Bounds(t0)

	t.Run("a store without the mark refuses until it is seeded, once", func(t *testing.T) {
		s := newStore(t)
		d, err := decide(s, ctx, sc.checks(0), t0)
		if err != nil || d.Allowed || d.RefusedBy(sc.checks(0)) != sc.mark {
			t.Fatalf("decision on an unseeded store: %+v, %v; want refused by the mark", d, err)
		}
		seeds := []Seed{{Limit: sc.day, End: dayEnd, Used: 40}, {Limit: sc.month, End: monthEnd, Used: 700}}
		for i, want := range []bool{true, false} {
			if did, err := s.Reseed(ctx, sc.mark, 3, seeds, t0); err != nil || did != want {
				t.Fatalf("re-seed %d: %v, %v; want %v", i, did, err, want)
			}
		}
		d, err = decide(s, ctx, sc.checks(3), t0)
		if err != nil || !d.Allowed || d.Remaining[0] != 59 || d.Remaining[1] != 290 {
			t.Fatalf("decision after re-seeding: %+v, %v; want allowed with 59 requests and 290 µ$ left", d, err)
		}
		if d, _ := decide(s, ctx, sc.checks(4), t0); d.Allowed {
			t.Fatal("a decision asking for a later version than the mark holds was allowed")
		}
	})

	t.Run("re-seeding takes the larger use and never an older window", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Reseed(ctx, sc.mark, 0, nil, t0); err != nil {
			t.Fatal(err)
		}
		for range 50 {
			if d, err := decide(s, ctx, sc.checks(0), t0); err != nil || !d.Allowed {
				t.Fatalf("decision: %+v, %v", d, err)
			}
		}
		yesterday := dayEnd.Add(-24 * time.Hour)
		seeds := []Seed{{Limit: sc.day, End: dayEnd, Used: 30}, {Limit: sc.month, End: monthEnd, Used: 900}, {Limit: sc.day, End: yesterday, Used: 99}}
		if did, err := s.Reseed(ctx, sc.mark, 1, seeds, t0); err != nil || !did {
			t.Fatalf("re-seed: %v, %v", did, err)
		}
		st, err := s.Snapshot(ctx, sc.mark, 1, []*Limit{sc.day, sc.month}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Current || st.Version != 2 || st.Windows[0].Used != 50 || st.Windows[1].Used != 900 || !st.Windows[0].End.Equal(dayEnd) {
			t.Fatalf("snapshot %+v; want current at version 2, 50 requests (the store's) and 900 µ$ (the record's)", st)
		}
	})

	t.Run("a snapshot of a store behind the record does not move its mark", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Reseed(ctx, sc.mark, 5, nil, t0); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			st, err := s.Snapshot(ctx, sc.mark, 7, []*Limit{sc.day}, t0)
			if err != nil || st.Current || st.Version != 5 {
				t.Fatalf("snapshot asking for 7 of a store at 5: %+v, %v; want not current, still 5", st, err)
			}
		}
		st, err := s.Snapshot(ctx, sc.mark, 5, []*Limit{sc.day}, t0)
		if err != nil || !st.Current || st.Version != 6 || st.Windows[0] != (Seed{}) {
			t.Fatalf("snapshot asking for 5: %+v, %v; want current at 6, the day's window empty", st, err)
		}
		if st, _ := s.Snapshot(ctx, NewMark("{tenant:other}:record", LevelTenant), 0, nil, t0); st.Version != -1 || st.Current {
			t.Fatalf("snapshot of a scope never seeded: %+v; want version -1, not current", st)
		}
	})

	t.Run("a settlement leaves the mark as it is", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Reseed(ctx, sc.mark, 2, nil, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, "s1", []Check{{Limit: sc.month, Cost: 5}, {Limit: sc.mark, Cost: -2}}, t0); err != nil {
			t.Fatal(err)
		}
		if d, err := decide(s, ctx, sc.checks(2), t0); err != nil || !d.Allowed || d.Remaining[1] != 985 {
			t.Fatalf("decision: %+v, %v; want allowed, 985 µ$ left", d, err)
		}
	})
}

func TestMemoryRecord(t *testing.T) {
	runRecordCase(t, func(*testing.T) recordStore { return NewMemory() })
}

func TestRedisRecord(t *testing.T) {
	server := redisserver.Start(t)
	runRecordCase(t, func(t *testing.T) recordStore {
		client := server.Client(t)
		if err := client.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return NewRedis(client, WithCallerClock())
	})
}

func TestClusterRecord(t *testing.T) {
	cluster := redisserver.StartCluster(t)
	runRecordCase(t, func(t *testing.T) recordStore {
		s, _ := clusterStore(t, cluster, WithCallerClock())
		return s
	})
}
