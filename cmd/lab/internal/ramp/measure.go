package ramp

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// window is the provider's rolling window.
const window = time.Minute

// schedule is when the ramp adds users: users[k] of them from step k on,
// lastStep is when the ramp's last users arrived.
func (s schedule) lastStep() time.Duration {
	return time.Duration(max(len(s.users)-1, 0)) * s.step
}

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
	// UserPagesLeast, UserPagesMedian and UserPagesMost are the pages
	// served so far, by the bucket's end, to the users who had started a
	// book by then: the least served of them, the median and the most.
	UserPagesLeast  float64 `json:"userPagesLeast"`
	UserPagesMedian float64 `json:"userPagesMedian"`
	UserPagesMost   float64 `json:"userPagesMost"`
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
	perUser := userPages(r.pages, n, width)
	for b := range n {
		pt := point(time.Duration(b)*width, width, served[b], errs[b], waits[b])
		pt.UserPagesLeast, pt.UserPagesMedian, pt.UserPagesMost = perUser[b][0], perUser[b][1], perUser[b][2]
		s.Points = append(s.Points, pt)
	}
	return s
}

// userPages are, at the end of each of n buckets of width, the least,
// median and most pages served so far to a user who had started a book by
// then. The last bucket counts every page, as seriesOf does.
func userPages(pages []page, n int, width time.Duration) [][3]float64 {
	started, answered := map[int]time.Duration{}, map[int][]time.Duration{}
	for _, p := range pages {
		if at, ok := started[p.user]; !ok || p.sent < at {
			started[p.user] = p.sent
		}
		if p.cause == Served {
			answered[p.user] = append(answered[p.user], p.answered)
		}
	}
	out := make([][3]float64, n)
	for b := range out {
		end := time.Duration(b+1) * width
		if b == n-1 {
			end = math.MaxInt64
		}
		var counts []int
		for user, at := range started {
			if at < end {
				counts = append(counts, countBefore(answered[user], end))
			}
		}
		slices.Sort(counts)
		if len(counts) > 0 {
			out[b] = [3]float64{float64(counts[0]), float64(labrun.Percentile(counts, 50)), float64(counts[len(counts)-1])}
		}
	}
	return out
}

// countBefore counts the times before end.
func countBefore(times []time.Duration, end time.Duration) int {
	n := 0
	for _, t := range times {
		if t < end {
			n++
		}
	}
	return n
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
