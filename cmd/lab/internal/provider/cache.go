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
// kept for ttl after the last prompt that had it. It keeps at most max of
// them, forgetting the least recently seen first, and the longer of those
// seen at once first, so that it never keeps a prefix without the shorter
// ones that lead to it. Create it with newCache. It is safe for concurrent
// use.
type cache struct {
	ttl time.Duration // zero keeps nothing
	max int

	mu    sync.Mutex
	seen  map[cacheKey]*list.Element
	order list.List // of *seenPrefix, least recently seen first
}

// cacheKey is one prefix of one model's prompts.
type cacheKey struct {
	model string
	sum   uint64
}

type seenPrefix struct {
	key cacheKey
	at  time.Time
}

func newCache(ttl time.Duration, max int) *cache {
	return &cache{ttl: ttl, max: max, seen: map[cacheKey]*list.Element{}}
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
	if back := c.order.Back(); back != nil {
		now = later(now, back.Value.(*seenPrefix).at) // time that jumps backwards keeps the order
	}
	for _, sum := range slices.Backward(p.marks) { // the shortest last, to be forgotten last
		c.touch(cacheKey{model, sum}, now)
	}
	for c.order.Len() > c.max {
		c.forget(c.order.Front())
	}
}

// touch marks key seen at now, the latest of all.
func (c *cache) touch(key cacheKey, now time.Time) {
	if e := c.seen[key]; e != nil {
		e.Value.(*seenPrefix).at = now
		c.order.MoveToBack(e)
		return
	}
	c.seen[key] = c.order.PushBack(&seenPrefix{key: key, at: now})
}

// expire forgets the prefixes last seen ttl or more before now.
func (c *cache) expire(now time.Time) {
	for e := c.order.Front(); e != nil && !now.Before(e.Value.(*seenPrefix).at.Add(c.ttl)); e = c.order.Front() {
		c.forget(e)
	}
}

func (c *cache) forget(e *list.Element) {
	delete(c.seen, c.order.Remove(e).(*seenPrefix).key)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}
