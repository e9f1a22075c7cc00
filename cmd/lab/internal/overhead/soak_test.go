package overhead

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSoakRate(t *testing.T) {
	closed := []Result{
		{Shape: ShapeChat, Connections: 64, Target: Proxy, CallsPerSecond: 9000},
		{Shape: ShapeChat, Connections: 64, Target: Gateway, CallsPerSecond: 5000},
		{Shape: ShapeStream, Connections: 64, Target: Gateway},
	}
	tests := []struct {
		name        string
		shape       string
		connections int
		want        int
		wantFrom    string
	}{
		{name: "80% of the gateway's closed loop", shape: ShapeChat, connections: 64, want: 4000,
			wantFrom: "80% of the 5000 calls a second the gateway served on 64 conns"},
		{name: "no closed loop: the highest rate", shape: ShapeChat, want: 2000, wantFrom: "the highest rate"},
		{name: "a closed loop that served nothing: the highest rate", shape: ShapeStream, connections: 64, want: 2000, wantFrom: "the highest rate"},
		{name: "a shape not run on closed loop: the highest rate", shape: ShapeEmbeddings, connections: 64, want: 2000, wantFrom: "the highest rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, from := soakRate(closed, tc.shape, tc.connections, 2000)
			if got != tc.want || from != tc.wantFrom {
				t.Errorf("soakRate = %d, %q; want %d, %q", got, from, tc.want, tc.wantFrom)
			}
		})
	}
}

func TestSoakWindows(t *testing.T) {
	tests := []struct {
		soak time.Duration
		want []time.Duration
	}{
		{soak: 10 * time.Minute, want: repeat(120, 5*time.Second)},
		{soak: time.Minute, want: repeat(12, 5*time.Second)},
		{soak: 62 * time.Second, want: repeat(13, 62*time.Second/13)},
		{soak: 600 * time.Millisecond, want: repeat(6, 100*time.Millisecond)},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(soakWindows(tc.soak), tc.want); diff != "" {
			t.Errorf("soakWindows(%s) (-got +want):\n%s", tc.soak, diff)
		}
	}
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestThirdMeans(t *testing.T) {
	tests := []struct {
		name         string
		xs           []float64
		second, last float64
		ok           bool
	}{
		{name: "three", xs: []float64{9, 2, 3}, second: 2, last: 3, ok: true},
		{name: "six, two a third", xs: []float64{100, 100, 10, 20, 30, 40}, second: 15, last: 35, ok: true},
		{name: "seven: the last third takes the one left over", xs: []float64{1, 1, 4, 4, 6, 6, 9}, second: 4, last: 7, ok: true},
		{name: "two are too few", xs: []float64{1, 2}},
		{name: "none", xs: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			second, last, ok := thirdMeans(tc.xs)
			if second != tc.second || last != tc.last || ok != tc.ok {
				t.Errorf("thirdMeans(%v) = %v, %v, %t; want %v, %v, %t", tc.xs, second, last, ok, tc.second, tc.last, tc.ok)
			}
		})
	}
}

func TestFlatHeap(t *testing.T) {
	// soakOf is a soak whose samples had these heaps in use, in MiB.
	soakOf := func(heaps ...int64) Soak {
		s := Soak{Shape: ShapeChat, Target: Gateway, Rate: 4000}
		for i, h := range heaps {
			s.Samples = append(s.Samples, SoakSample{Seconds: float64(5 * (i + 1)), RSSBytes: 50 << 20, HeapInuseBytes: h << 20})
		}
		return s
	}
	const rule = "at most 1.1 × its mean over the second third"
	tests := []struct {
		name string
		soak Soak
		want Check
	}{{
		name: "flat after its warm-up",
		soak: soakOf(2, 4, 10, 10, 11, 10),
		want: Check{Name: checkFlatHeap, Rule: rule, Shape: ShapeChat, Rate: 4000, Target: Gateway, Measured: true, Ratio: 1.05, MaxRatio: 1.1, Pass: true},
	}, {
		name: "at the bound, which passes",
		soak: soakOf(10, 10, 10, 10, 11, 11),
		want: Check{Name: checkFlatHeap, Rule: rule, Shape: ShapeChat, Rate: 4000, Target: Gateway, Measured: true, Ratio: 1.1, MaxRatio: 1.1, Pass: true},
	}, {
		name: "growing",
		soak: soakOf(10, 11, 12, 13, 14, 15),
		want: Check{Name: checkFlatHeap, Rule: rule, Shape: ShapeChat, Rate: 4000, Target: Gateway, Measured: true, Ratio: 29.0 / 25, MaxRatio: 1.1},
	}, {
		name: "a sample without its heap is not measured",
		soak: soakOf(10, 10, 0, 10, 10, 10),
		want: Check{Name: checkFlatHeap, Rule: rule, Shape: ShapeChat, Rate: 4000, Target: Gateway, MaxRatio: 1.1},
	}, {
		name: "too few samples are not measured",
		soak: soakOf(10, 10),
		want: Check{Name: checkFlatHeap, Rule: rule, Shape: ShapeChat, Rate: 4000, Target: Gateway, MaxRatio: 1.1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(flatHeap(tc.soak), tc.want, approx); diff != "" {
				t.Errorf("flatHeap (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseGoMemory(t *testing.T) {
	const page = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 142
# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 9.5e+06
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2345344e+07
# HELP sluice_gateway_requests_total Requests.
# TYPE sluice_gateway_requests_total counter
sluice_gateway_requests_total{tenant="lab"} 1000
`
	tests := []struct {
		name           string
		page           string
		heap           int64
		goroutines     int
		wantErrContent string
	}{
		{name: "the Go runtime's gauges", page: page, heap: 12_345_344, goroutines: 142},
		{name: "no heap in use", page: strings.ReplaceAll(page, "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes"), wantErrContent: "no gauge go_memstats_heap_inuse_bytes"},
		{name: "no goroutines", page: strings.ReplaceAll(page, "go_goroutines", "go_threads"), wantErrContent: "no gauge go_goroutines"},
		{name: "not the text format", page: "<html>not found</html>\n", wantErrContent: "metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			heap, goroutines, err := parseGoMemory([]byte(tc.page))
			if heap != tc.heap || goroutines != tc.goroutines || (err == nil) != (tc.wantErrContent == "") ||
				err != nil && !strings.Contains(err.Error(), tc.wantErrContent) {
				t.Errorf("parseGoMemory = %d, %d, %v; want %d, %d, error %q", heap, goroutines, err, tc.heap, tc.goroutines, tc.wantErrContent)
			}
		})
	}
}
