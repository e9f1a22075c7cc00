package ids

import (
	"strings"
	"sync"
	"testing"
)

func TestNamesDoNotRepeat(t *testing.T) {
	a, b := New("req_"), New("req_")
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range []*Sequence{a, b, a, b} {
		wg.Go(func() {
			for range 1000 {
				name := s.Next()
				mu.Lock()
				if seen[name] {
					t.Errorf("%q handed out twice", name)
				}
				seen[name] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 4000 {
		t.Errorf("%d names for 4,000 calls", len(seen))
	}
	if name := a.Next(); !strings.HasPrefix(name, "req_") {
		t.Errorf("name %q; want the prefix req_", name)
	}
}
