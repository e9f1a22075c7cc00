package fairqueue

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkDispatch measures Next and Pop, with a new item pushed for each served, over 10, 1,000
// and 100,000 backlogged lanes (one tenant and user each).
func BenchmarkDispatch(b *testing.B) {
	for _, lanes := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			q := New(Options{})
			names := make([]string, lanes)
			for i := range names {
				names[i] = fmt.Sprint("tenant-", i)
				for range 2 {
					q.Push(item(names[i], "u", 1, Interactive, 800))
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				it, _ := q.Next(t0)
				q.Pop(it)
				it.elem, it.user = nil, nil
				q.Push(it)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dispatches/s")
		})
	}
}

// BenchmarkBytesPerQueuedRequest reports the queue's memory for one more waiting request, in a
// queue of 1,000 tenants with 10 users each.
func BenchmarkBytesPerQueuedRequest(b *testing.B) {
	const n = 100_000
	var before, after runtime.MemStats
	for b.Loop() {
		items := make([]*Item, n)
		for i := range items {
			items[i] = item(fmt.Sprint("tenant-", i%1000), fmt.Sprint("user-", i%10), 1, Interactive, 800)
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		q := New(Options{})
		for _, it := range items {
			q.Push(it)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/n, "bytes/request")
		runtime.KeepAlive(q)
		runtime.KeepAlive(items)
	}
}

// BenchmarkEstimateWaitBesideComebacks is the door's estimate for a new tenant's call while 1,000
// tenants wait with two items each and 10,000 comebacks are expected from them over the next
// minute: what each call at the door costs under the dispatcher's lock.
func BenchmarkEstimateWaitBesideComebacks(b *testing.B) {
	q := New(Options{})
	for i := range 1000 {
		it := item(fmt.Sprintf("tenant-%04d", i), "u", 1, Interactive, 800)
		q.Push(it)
		q.Push(item(it.Tenant, "u", 1, Interactive, 800))
		for k := range 10 {
			q.Expect(it, t0, t0.Add(time.Duration(k*1000+i)*6*time.Millisecond))
		}
	}
	newcomer := item("newcomer", "u", 1, Interactive, 800)
	b.ResetTimer()
	for b.Loop() {
		q.EstimateWait(newcomer, 5000, t0)
	}
}
