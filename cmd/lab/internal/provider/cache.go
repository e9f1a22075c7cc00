package provider

import (
	"container/list"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// The prefixes the cache keeps, in tokens: 1024, 1152, 1280, and so on, as
// OpenAI caches.
const (
	firstCachedTokens = 1024
	cachedTokensStep  = 128
)

// FNV-1a's 64-bit offset basis and prime.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// prefix is the identity of a prompt's text as it is written: the hash of
// each of its prefixes of 1024, 1152, 1280... tokens, a token being
// [openai.BytesPerToken] bytes of it, so that two prompts share a prefix of
// n tokens when their first 4n bytes are the same.
//
// The zero prefix is empty and ready to use. A copy made with clone
// may be written apart from the original.
type prefix struct {
	sum   uint64 // FNV-1a of the bytes written, once n > 0
	n     int64  // bytes written
	marks []uint64
}

// write adds text to the prefix.
func (p *prefix) write(text string) {
	const first, step = firstCachedTokens * openai.BytesPerToken, cachedTokensStep * openai.BytesPerToken
	if p.n == 0 {
		p.sum = fnvOffset
	}
	for i := range len(text) {
		p.sum = (p.sum ^ uint64(text[i])) * fnvPrime
		p.n++
		if p.n >= first && (p.n-first)%step == 0 {
			p.marks = append(p.marks, p.sum)
		}
	}
}

// clone is a copy of p that can be written without changing p.
func (p prefix) clone() prefix {
	p.marks = slices.Clip(p.marks)
	return p
}

// prefixOf is the prefix of text.
func prefixOf(text string) prefix {
	var p prefix
	p.write(text)
	return p
}

// cachedTokens is the tokens of the prefix that ends at the n-th mark.
func cachedTokens(n int) int64 {
	if n == 0 {
		return 0
	}
	return firstCachedTokens + int64(n-1)*cachedTokensStep
}

// cache is the prefixes of the prompts an account has seen, by model, each
// kept for its TTL after the last prompt that had it. It keeps at most max
// of them, forgetting first those that would expire soonest, and of those
// seen at once with the same TTL the longer first, so that it never keeps
// a prefix record wrote without the shorter ones that lead to it. Create it
// with newCache. It is safe for concurrent use.
type cache struct {
	ttl time.Duration // of the prefixes record keeps; zero keeps none
	max int

	mu    sync.Mutex
	seen  map[cacheKey]*list.Element
	byTTL map[time.Duration]*list.List // of *seenPrefix, each least recently seen first
}

// cacheKey is one prefix of one model's prompts.
type cacheKey struct {
	model string
	sum   uint64
}

type seenPrefix struct {
	key cacheKey
	at  time.Time
	ttl time.Duration
}

// expiry is when p is forgotten unless it is seen again.
func (p *seenPrefix) expiry() time.Time { return p.at.Add(p.ttl) }

func newCache(ttl time.Duration, max int) *cache {
	return &cache{ttl: ttl, max: max, seen: map[cacheKey]*list.Element{}, byTTL: map[time.Duration]*list.List{}}
}

// lookup is how many tokens of a prompt to model with p's marks the cache
// holds at now: its longest prefix seen within the ttl.
func (c *cache) lookup(now time.Time, model string, p prefix) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	n := 0
	for n < len(p.marks) && c.seen[cacheKey{model, p.marks[n]}] != nil {
		n++
	}
	return cachedTokens(n)
}

// record notes that a prompt to model with p's marks was seen at now.
func (c *cache) record(now time.Time, model string, p prefix) {
	if c.ttl == 0 || len(p.marks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sum := range slices.Backward(p.marks) { // the shortest last, to be forgotten last
		c.touch(cacheKey{model, sum}, now, c.ttl)
	}
	c.trim()
}

// touch marks key seen at now, the latest of all those kept for ttl, and
// keeps it for ttl. Time that jumps backwards keeps the order.
func (c *cache) touch(key cacheKey, now time.Time, ttl time.Duration) {
	l := c.byTTL[ttl]
	if l == nil {
		l = list.New()
		c.byTTL[ttl] = l
	}
	if back := l.Back(); back != nil {
		now = later(now, back.Value.(*seenPrefix).at)
	}
	if e := c.seen[key]; e != nil {
		if p := e.Value.(*seenPrefix); p.ttl == ttl {
			p.at = now
			l.MoveToBack(e)
			return
		}
		c.forget(e)
	}
	c.seen[key] = l.PushBack(&seenPrefix{key: key, at: now, ttl: ttl})
}

// expire forgets the prefixes last seen their ttl or more before now.
func (c *cache) expire(now time.Time) {
	for _, l := range c.byTTL {
		for e := l.Front(); e != nil && !now.Before(e.Value.(*seenPrefix).expiry()); e = l.Front() {
			c.forget(e)
		}
	}
}

// trim forgets the prefixes that would expire soonest until at most max
// are kept.
func (c *cache) trim() {
	for len(c.seen) > c.max {
		c.forget(c.soonest())
	}
}

// soonest is the prefix that would expire first, the one of the shorter
// ttl of two that would expire together; nil if there are none.
func (c *cache) soonest() *list.Element {
	var first *list.Element
	for _, l := range c.byTTL {
		e := l.Front()
		if e == nil {
			continue
		}
		p := e.Value.(*seenPrefix)
		if first == nil {
			first = e
			continue
		}
		if q := first.Value.(*seenPrefix); p.expiry().Before(q.expiry()) || p.expiry().Equal(q.expiry()) && p.ttl < q.ttl {
			first = e
		}
	}
	return first
}

func (c *cache) forget(e *list.Element) {
	p := e.Value.(*seenPrefix)
	c.byTTL[p.ttl].Remove(e)
	delete(c.seen, p.key)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}
