package ramp

import (
	"cmp"
	"slices"
	"time"
)

// window is the provider's rolling window.
const window = time.Minute

// schedule is when the ramp adds users: users[k] of them from step k on,
// steps step apart.
type schedule struct {
	users []int
	step  time.Duration
}

// usersAt is how many users the ramp had started t after its start.
func (s schedule) usersAt(t time.Duration) int {
	if len(s.users) == 0 || t < 0 {
		return 0
	}
	return s.users[min(int(t/s.step), len(s.users)-1)]
}

// steps are when the steps begin, from the ramp's start.
func (s schedule) steps() []time.Duration {
	at := make([]time.Duration, len(s.users))
	for k := range at {
		at[k] = time.Duration(k) * s.step
	}
	return at
}

// peakPerMinute is the most tokens the admitted calls held in any rolling
// minute, counted as the provider counts them: from a call's admission
// until exactly a minute later.
func peakPerMinute(calls []call) int64 {
	var in []call
	for _, c := range calls {
		if c.admitted() {
			in = append(in, c)
		}
	}
	slices.SortStableFunc(in, func(a, b call) int { return cmp.Compare(a.at, b.at) })
	var sum, peak int64
	oldest := 0
	for _, c := range in {
		sum += c.tokens
		for in[oldest].at+window <= c.at {
			sum -= in[oldest].tokens
			oldest++
		}
		peak = max(peak, sum)
	}
	return peak
}

// Series is a case over time, in buckets of equal width.
type Series struct {
	BucketSeconds float64 `json:"bucketSeconds"`
	// StepsAtSeconds are when the ramp's steps began.
	StepsAtSeconds []float64 `json:"stepsAtSeconds"`
	Points         []Point   `json:"points"`
}

// Point is one bucket of a Series.
type Point struct {
	// AtSeconds is the bucket's start.
	AtSeconds float64 `json:"atSeconds"`
	// PagesPerSecond counts the pages served in the bucket, a second.
	PagesPerSecond float64 `json:"pagesPerSecond"`
	// ProviderErrorsPerSecond counts the provider's 429s and 503s in the
	// bucket, by the call's arrival, a second.
	ProviderErrorsPerSecond float64 `json:"providerErrorsPerSecond"`
	// MeanWaitSeconds is the mean wait of the pages served in the bucket;
	// 0 if none was.
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
}

// bucketFor is the width of a series' buckets: a second, or narrower for a
// ramp whose steps are short, so each step spans a few buckets.
func bucketFor(step time.Duration) time.Duration {
	return min(max(step/3, 100*time.Millisecond), time.Second)
}

// seriesOf is a case's series, from its start to its end.
func seriesOf(r caseRun) Series {
	width := bucketFor(r.schedule.step)
	n := max(int((r.elapsed+width-1)/width), 1)
	served, errs := make([]int, n), make([]int, n)
	waits := make([]time.Duration, n)
	bucket := func(t time.Duration) int { return min(max(int(t/width), 0), n-1) }
	for _, p := range r.pages {
		if p.cause == Served {
			b := bucket(p.answered)
			served[b]++
			waits[b] += p.answered - p.sent
		}
	}
	for _, c := range r.calls {
		if c.refusedByProvider() {
			errs[bucket(c.at)]++
		}
	}
	s := Series{BucketSeconds: width.Seconds()}
	for _, at := range r.schedule.steps() {
		s.StepsAtSeconds = append(s.StepsAtSeconds, at.Seconds())
	}
	for b := range n {
		s.Points = append(s.Points, point(time.Duration(b)*width, width, served[b], errs[b], waits[b]))
	}
	return s
}

func point(at, width time.Duration, served, errs int, waits time.Duration) Point {
	p := Point{
		AtSeconds:               at.Seconds(),
		PagesPerSecond:          float64(served) / width.Seconds(),
		ProviderErrorsPerSecond: float64(errs) / width.Seconds(),
	}
	if served > 0 {
		p.MeanWaitSeconds = (waits / time.Duration(served)).Seconds()
	}
	return p
}
