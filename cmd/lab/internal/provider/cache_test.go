package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// transcript is n tokens of text no shorter prefix of which repeats: words
// of eight bytes, two tokens each, numbered from first.
func transcript(first, n int) string {
	var b strings.Builder
	for i := range n / 2 {
		fmt.Fprintf(&b, "w%06d ", first+i)
	}
	return b.String()
}

func TestPrefixMarks(t *testing.T) {
	tests := []struct {
		tokens int
		want   int // marks
	}{{1022, 0}, {1024, 1}, {1150, 1}, {1152, 2}, {20_000, 149}}
	for _, tc := range tests {
		if got := len(prefixOf(transcript(0, tc.tokens)).marks); got != tc.want {
			t.Errorf("a prompt of %d tokens has %d marks; want %d", tc.tokens, got, tc.want)
		}
	}
	whole := prefixOf(transcript(0, 3000))
	var parts prefix
	for _, piece := range []string{transcript(0, 1000), transcript(500, 1500), transcript(1250, 500)} {
		parts.write(piece)
	}
	if fmt.Sprint(parts) != fmt.Sprint(whole) {
		t.Errorf("a prompt written in pieces has marks %v; want those of the whole, %v", parts.marks, whole.marks)
	}
}

func TestCloneWritesApart(t *testing.T) {
	base := prefixOf(transcript(0, 1280)) // 3 marks, room for a fourth
	a, b := base.clone(), base.clone()
	a.write(transcript(10_000, 200))
	b.write(transcript(20_000, 200))
	if len(base.marks) != 3 || a.marks[3] == b.marks[3] {
		t.Errorf("clones share their marks: base %v, a %v, b %v", base.marks, a.marks, b.marks)
	}
}

func TestCacheGrowingTranscript(t *testing.T) {
	c := newCache(5*time.Minute, 1_000_000)
	const model = "gpt-4o"
	history := transcript(0, 20_000)
	steps := []struct {
		prompt string
		want   int64
	}{
		{history, 0}, // never seen
		{history + transcript(100_000, 100), 19_968},        // 1024 + 148×128 ≤ 20,000
		{history + transcript(100_000, 400), 20_096},        // 1024 + 149×128 ≤ 20,100
		{history + transcript(100_000, 400), 20_352},        // all of its 20,400: 1024 + 151×128
		{transcript(50_000, 20_000) + history, 0},           // another beginning
		{history[:4*1000], 0},                               // under 1,024 tokens
		{history[:4*1100] + transcript(200_000, 300), 1024}, // the first 1,100 tokens seen
		{transcript(0, 1000) + transcript(300_000, 300), 0}, // only 1,000 tokens seen
	}
	for i, st := range steps {
		p := prefixOf(st.prompt)
		now := t0.Add(time.Duration(i) * time.Second)
		if got := c.lookup(now, model, p); got != st.want {
			t.Errorf("step %d: lookup() = %d cached tokens; want %d", i, got, st.want)
		}
		c.record(now, model, p)
	}
	if got := c.lookup(t0.Add(time.Minute), "gpt-4o-mini", prefixOf(history)); got != 0 {
		t.Errorf("another model's lookup() = %d; want 0: each model has its own cache", got)
	}
}

func TestCacheExpires(t *testing.T) {
	const ttl = 5 * time.Minute
	c := newCache(ttl, 1_000_000)
	short, long := prefixOf(transcript(0, 2000)), prefixOf(transcript(0, 3000))
	c.record(t0, "m", long)
	c.record(t0.Add(time.Minute), "m", short) // renews the prefixes of the first 2,000 tokens
	tests := []struct {
		at   time.Duration
		want int64
	}{
		{at: ttl - time.Nanosecond, want: 2944},
		{at: ttl, want: 1920}, // the longer prefixes were last seen at t0
		{at: ttl + time.Minute - time.Nanosecond, want: 1920},
		{at: ttl + time.Minute, want: 0},
	}
	for _, tc := range tests {
		if got := c.lookup(t0.Add(tc.at), "m", long); got != tc.want {
			t.Errorf("lookup(t0+%v) = %d; want %d", tc.at, got, tc.want)
		}
	}
}

func TestCacheForgetsTheLongestFirst(t *testing.T) {
	c := newCache(time.Hour, 10)
	old, recent := prefixOf(transcript(0, 1024+7*128)), prefixOf(transcript(100_000, 1024+3*128))
	c.record(t0, "m", old)                     // 8 prefixes
	c.record(t0.Add(time.Second), "m", recent) // 4 more: the 2 longest of old go
	if got, want := c.lookup(t0.Add(time.Minute), "m", old), int64(1024+5*128); got != want {
		t.Errorf("lookup(old) = %d; want %d: its shorter prefixes kept", got, want)
	}
	if got, want := c.lookup(t0.Add(time.Minute), "m", recent), int64(1024+3*128); got != want {
		t.Errorf("lookup(recent) = %d; want %d", got, want)
	}
}

func TestCacheOff(t *testing.T) {
	c := newCache(0, 0)
	p := prefixOf(transcript(0, 2000))
	c.record(t0, "m", p)
	if got := c.lookup(t0, "m", p); got != 0 {
		t.Errorf("lookup() = %d; want 0 with no ttl", got)
	}
}

func TestCacheTimeThatJumpsBackwards(t *testing.T) {
	c := newCache(time.Minute, 100)
	a, b := prefixOf(transcript(0, 1024)), prefixOf(transcript(100_000, 1024))
	c.record(t0.Add(30*time.Second), "m", a)
	c.record(t0, "m", b) // counted as seen at t0+30s
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{89 * time.Second, 1024}, {90 * time.Second, 0}} {
		if got := c.lookup(t0.Add(tc.at), "m", b); got != tc.want {
			t.Errorf("lookup(b, t0+%v) = %d; want %d", tc.at, got, tc.want)
		}
	}
}
