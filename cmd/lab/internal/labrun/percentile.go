package labrun

import (
	"cmp"
	"math"
)

// Percentile is the nearest-rank p-th percentile of sorted (ascending); 0 when sorted is empty.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
