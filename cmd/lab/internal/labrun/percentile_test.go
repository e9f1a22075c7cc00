package labrun

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	const ms = time.Millisecond
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * ms
	}
	four := []time.Duration{1 * ms, 2 * ms, 3 * ms, 4 * ms}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{name: "none", sorted: nil, p: 50, want: 0},
		{name: "one is every percentile", sorted: []time.Duration{7 * ms}, p: 99, want: 7 * ms},
		{name: "p50 of four is the second", sorted: four, p: 50, want: 2 * ms},
		{name: "p95 of four is the last", sorted: four, p: 95, want: 4 * ms},
		{name: "p50 of a hundred", sorted: hundred, p: 50, want: 50 * ms},
		{name: "p95 of a hundred", sorted: hundred, p: 95, want: 95 * ms},
		{name: "p99 of a hundred", sorted: hundred, p: 99, want: 99 * ms},
		{name: "p100 is the largest", sorted: hundred, p: 100, want: 100 * ms},
		{name: "p0 is the smallest", sorted: hundred, p: 0, want: 1 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(p%v) = %s; want %s", tc.p, got, tc.want)
			}
		})
	}
}
