package provider

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/anthropic"
)

// promptOf is a prompt whose i-th block ends at ends[i] tokens, its Sum
// i+1, a breakpoint of ttls[i].
func promptOf(ends []int64, ttls map[int]time.Duration) anthropic.Prompt {
	p := anthropic.Prompt{Tokens: ends[len(ends)-1]}
	for i, end := range ends {
		p.Blocks = append(p.Blocks, anthropic.Boundary{Tokens: end, Sum: uint64(i + 1), TTL: ttls[i]})
	}
	return p
}

func TestPlanCache(t *testing.T) {
	const m5, h1 = anthropic.TTL5m, anthropic.TTL1h
	many := make([]int64, 30) // 30 blocks of 100 tokens
	for i := range many {
		many[i] = int64(i+1) * 100
	}
	tests := []struct {
		name   string
		ends   []int64
		ttls   map[int]time.Duration
		cached []uint64 // the Sums the cache holds
		want   cacheUse
	}{{
		name: "no breakpoint: nothing read or written",
		ends: []int64{3000, 5000},
		want: cacheUse{},
	}, {
		name: "one breakpoint, first seen: written for five minutes",
		ends: []int64{3000, 5000}, ttls: map[int]time.Duration{0: m5},
		want: cacheUse{write5m: 3000, writes: []cacheWrite{{1, m5}}},
	}, {
		name: "one breakpoint, seen: read",
		ends: []int64{3000, 5000}, ttls: map[int]time.Duration{0: m5}, cached: []uint64{1},
		want: cacheUse{read: 3000, hit: 1},
	}, {
		name: "a breakpoint under 1,024 tokens caches nothing",
		ends: []int64{1000, 5000}, ttls: map[int]time.Duration{0: m5},
		want: cacheUse{},
	}, {
		name: "an hour, then five minutes, first seen: the package doc's example",
		ends: []int64{2000, 4000, 5000}, ttls: map[int]time.Duration{0: h1, 1: m5},
		want: cacheUse{write1h: 2000, write5m: 2000, writes: []cacheWrite{{1, h1}, {2, m5}}},
	}, {
		name: "an hour, then five minutes, the hour's prefix seen: read, and five minutes written",
		ends: []int64{2000, 4000, 5000}, ttls: map[int]time.Duration{0: h1, 1: m5}, cached: []uint64{1},
		want: cacheUse{read: 2000, hit: 1, write5m: 2000, writes: []cacheWrite{{2, m5}}},
	}, {
		name: "a conversation grown by a turn reads what its last call wrote, looking back from its breakpoint",
		ends: []int64{2000, 2500, 3000, 3500}, ttls: map[int]time.Duration{3: m5}, cached: []uint64{2},
		want: cacheUse{read: 2500, hit: 2, write5m: 1000, writes: []cacheWrite{{4, m5}}},
	}, {
		name: "a prefix more than 20 blocks before the breakpoint is not found",
		ends: many, ttls: map[int]time.Duration{29: m5}, cached: []uint64{9},
		want: cacheUse{write5m: 3000, writes: []cacheWrite{{30, m5}}},
	}, {
		name: "a prefix 20 blocks before the breakpoint is found",
		ends: many, ttls: map[int]time.Duration{29: m5}, cached: []uint64{10},
		want: cacheUse{read: 1000, hit: 10, write5m: 2000, writes: []cacheWrite{{30, m5}}},
	}, {
		name: "every breakpoint read: nothing written",
		ends: []int64{2000, 4000}, ttls: map[int]time.Duration{0: m5, 1: m5}, cached: []uint64{1, 2},
		want: cacheUse{read: 4000, hit: 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held := map[uint64]bool{}
			for _, sum := range tc.cached {
				held[sum] = true
			}
			got := planCache(promptOf(tc.ends, tc.ttls), func(sum uint64) bool { return held[sum] })
			if diff := cmp.Diff(got, tc.want, cmp.AllowUnexported(cacheUse{}, cacheWrite{})); diff != "" {
				t.Errorf("planCache() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestCacheKeepsEachPrefixForItsTTL(t *testing.T) {
	c := newCache(0, 10)
	p := promptOf([]int64{2000, 4000}, map[int]time.Duration{0: anthropic.TTL1h, 1: anthropic.TTL5m})
	c.keep(t0, "m", c.plan(t0, "m", p))
	if got := c.plan(t0.Add(4*time.Minute), "m", p); got.read != 4000 {
		t.Errorf("four minutes on: read %d; want all 4000", got.read)
	}
	if got := c.plan(t0.Add(5*time.Minute), "m", p); got.read != 2000 || got.write5m != 2000 {
		t.Errorf("five minutes on: read %d, wrote %d for five minutes; want the hour's 2000 read, the rest written again", got.read, got.write5m)
	}
	other := c.plan(t0, "n", p)
	if other.read != 0 {
		t.Errorf("another model read %d; want none", other.read)
	}
	c.keep(t0.Add(59*time.Minute), "m", c.plan(t0.Add(59*time.Minute), "m", p)) // a read keeps the hour again
	if got := c.plan(t0.Add(118*time.Minute), "m", p); got.read != 2000 {
		t.Errorf("an hour after a read: read %d; want 2000", got.read)
	}
}

func TestCacheForgetsWhatExpiresSoonestWhenFull(t *testing.T) {
	c := newCache(0, 2)
	c.keep(t0, "m", cacheUse{writes: []cacheWrite{{1, anthropic.TTL1h}, {2, anthropic.TTL5m}}})
	c.keep(t0.Add(time.Minute), "m", cacheUse{writes: []cacheWrite{{3, anthropic.TTL5m}}})
	held := func(sum uint64) bool { return c.seen[cacheKey{"m", sum}] != nil }
	if !held(1) || held(2) || !held(3) {
		t.Errorf("holds 1: %t, 2: %t, 3: %t; want the five minutes written first forgotten", held(1), held(2), held(3))
	}
}
