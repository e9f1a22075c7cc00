package balance

import (
	"net/url"
	"testing"
)

func endpoints(t *testing.T, raw ...string) []*url.URL {
	t.Helper()
	out := make([]*url.URL, len(raw))
	for i, s := range raw {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = u
	}
	return out
}

// TestPickKeepsEachPodWithinItsShare fills three Pods of 2 calls each to their capacity together,
// 6, and checks that none gets a third: the cap the gateway keeps on the total keeps each Pod's.
func TestPickKeepsEachPodWithinItsShare(t *testing.T) {
	var b Balancer
	pods := endpoints(t, "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1", "http://10.0.0.3:8000/v1")
	var leases []*Lease
	for range 6 {
		leases = append(leases, b.Pick(pods))
	}
	for _, p := range pods {
		if got := b.inFlightAt(p); got != 2 {
			t.Errorf("inFlightAt(%s) = %d; want 2", p, got)
		}
	}
	// One Pod's two calls end: the next two go to it, the least busy.
	first := leases[0].URL
	for _, l := range leases {
		if l.URL == first {
			l.Release()
		}
	}
	for range 2 {
		if got := b.Pick(pods).URL; got != first {
			t.Errorf("Pick() = %s; want the idle %s", got, first)
		}
	}
}

func TestPickTakesTiesInTurn(t *testing.T) {
	var b Balancer
	pods := endpoints(t, "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
	seen := map[string]int{}
	for range 4 {
		l := b.Pick(pods)
		seen[l.URL.Host]++
		l.Release()
	}
	if seen["10.0.0.1:8000"] != 2 || seen["10.0.0.2:8000"] != 2 {
		t.Errorf("idle Pods picked %v; want each twice", seen)
	}
}

func TestPickEdges(t *testing.T) {
	var b Balancer
	if l := b.Pick(nil); l != nil {
		t.Errorf("Pick(nil) = %v; want nil", l)
	}
	one := endpoints(t, "https://api.example/v1")
	l := b.Pick(one)
	if l.URL != one[0] || b.inFlightAt(one[0]) != 0 {
		t.Errorf("Pick(one) = %s, counted %d; want it, uncounted", l.URL, b.inFlightAt(one[0]))
	}
	l.Release()
	pods := endpoints(t, "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
	l = b.Pick(pods)
	l.Release()
	l.Release()
	if got := b.inFlightAt(l.URL); got != 0 {
		t.Errorf("InFlight after releasing twice = %d; want 0", got)
	}
}

// TestPickOtherLeavesTheUnreachablePod checks that a call whose Pod refused it is retried at
// another, even one busier, and at the same Pod only when there is no other.
func TestPickOtherLeavesTheUnreachablePod(t *testing.T) {
	var b Balancer
	pods := endpoints(t, "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
	busy := b.Pick(pods)
	failed := b.Pick(pods)
	if failed.URL == busy.URL {
		t.Fatalf("two calls at once went to %s; want one at each Pod", busy.URL)
	}
	retry := b.PickOther(pods, failed)
	if retry.URL != busy.URL || b.inFlightAt(failed.URL) != 0 || b.inFlightAt(busy.URL) != 2 {
		t.Errorf("the retry went to %s, with %d and %d in flight; want the other Pod, %s, with both calls",
			retry.URL, b.inFlightAt(failed.URL), b.inFlightAt(busy.URL), busy.URL)
	}
	one := pods[:1]
	l := b.Pick(one)
	if got := b.PickOther(one, l).URL; got != one[0] {
		t.Errorf("PickOther with one endpoint = %s; want it", got)
	}
}
