package provider

import (
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/anthropic"
)

// How an Anthropic account caches a prompt.
const (
	// minCachedPrompt is the fewest tokens a breakpoint caches: a shorter
	// prefix is not written.
	minCachedPrompt = 1024
	// lookback is how many blocks before a breakpoint a prompt looks for a
	// prefix the cache holds.
	lookback = 20
)

// cacheUse is how one prompt to an Anthropic account uses its cache, as
// Anthropic bills it. A prompt reads the longest prefix the cache holds
// that ends at a breakpoint, or at one of the lookback blocks before one:
// A tokens. It writes, for an hour, up to its last one-hour breakpoint after
// A, B tokens (A if it has none), and for five minutes up to its last
// breakpoint, C tokens (A if that is not after A). It is billed A tokens
// read, B - A written for an hour and C - B for five minutes.
//
// For example, a prompt of 5,000 tokens with a one-hour breakpoint at 2,000
// tokens and a five-minute one at 4,000, whose first 2,000 tokens an
// earlier prompt wrote, reads 2,000, writes 2,000 for five minutes, and has
// 1,000 input tokens besides; with neither written, it writes 2,000 for an
// hour and 2,000 for five minutes.
type cacheUse struct {
	read, write1h, write5m int64
	// hit is the prefix read, when read is not zero.
	hit uint64
	// writes are the breakpoints after A, to keep for their TTLs.
	writes []cacheWrite
}

// cacheWrite is a prefix to keep for ttl.
type cacheWrite struct {
	sum uint64
	ttl time.Duration
}

// planCache is how p uses a cache that holds the prefixes cached reports.
// A breakpoint of fewer than minCachedPrompt tokens caches nothing.
func planCache(p anthropic.Prompt, cached func(sum uint64) bool) cacheUse {
	var u cacheUse
	hit := hitAt(p, cached)
	if hit >= 0 {
		u.read, u.hit = p.Blocks[hit].Tokens, p.Blocks[hit].Sum
	}
	b, c := u.read, u.read
	for _, bp := range p.Blocks[hit+1:] {
		if bp.TTL == 0 || bp.Tokens < minCachedPrompt {
			continue
		}
		u.writes = append(u.writes, cacheWrite{bp.Sum, bp.TTL})
		if c = bp.Tokens; bp.TTL == anthropic.TTL1h {
			b = c
		}
	}
	u.write1h, u.write5m = b-u.read, c-b
	return u
}

// hitAt is the index of the block that ends the longest prefix of p the
// cache holds, among the breakpoints and the lookback blocks before each;
// -1 for none.
func hitAt(p anthropic.Prompt, cached func(sum uint64) bool) int {
	hit := -1
	for i, bp := range p.Blocks {
		if bp.TTL == 0 {
			continue
		}
		for j := i; j >= max(i-lookback, hit+1); j-- {
			if cached(p.Blocks[j].Sum) {
				hit = j
				break
			}
		}
	}
	return hit
}

// plan is how a prompt to model uses the cache at now.
func (c *cache) plan(now time.Time, model string, p anthropic.Prompt) cacheUse {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	return planCache(p, func(sum uint64) bool { return c.seen[cacheKey{model, sum}] != nil })
}

// keep notes, at now, what a prompt to model used as u says: the prefix it
// read is kept for its TTL again, and each it wrote for its own.
func (c *cache) keep(now time.Time, model string, u cacheUse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.seen[cacheKey{model, u.hit}]; u.read > 0 && e != nil {
		c.touch(cacheKey{model, u.hit}, now, e.Value.(*seenPrefix).ttl)
	}
	for _, w := range u.writes {
		c.touch(cacheKey{model, w.sum}, now, w.ttl)
	}
	c.trim()
}
