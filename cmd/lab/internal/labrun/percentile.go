package labrun

import (
	"math"
	"time"
)

// Percentile is the nearest-rank p-th percentile of sorted (ascending); 0 when sorted is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
