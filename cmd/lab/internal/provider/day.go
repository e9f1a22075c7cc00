package provider

import "time"

// day counts the requests admitted since the last midnight in a time zone,
// as Gemini counts its requests per day from midnight Pacific time. A day
// is whatever the zone makes it: 23 or 25 hours across a change of summer
// time.
//
// The zero day counts in UTC. It is not safe for concurrent use.
type day struct {
	loc   *time.Location // nil is UTC
	start time.Time      // the midnight the count began at
	n     int64
}

// roll begins a new day, with nothing counted, if now is past the day's
// end. Time that jumps backwards stays in the day.
func (d *day) roll(now time.Time) {
	if start := d.midnight(now); start.After(d.start) {
		d.start, d.n = start, 0
	}
}

// wait is how long after now one more request fits under limit, zero if
// it fits now or limit is zero (no limit). The day must have rolled at now.
func (d *day) wait(now time.Time, limit int64) time.Duration {
	if limit == 0 || d.n < limit {
		return 0
	}
	return d.end().Sub(now)
}

// midnight is the midnight that begins t's day.
func (d *day) midnight(t time.Time) time.Time {
	t = t.In(d.zone())
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// end is the midnight that ends the day.
func (d *day) end() time.Time {
	s := d.start.In(d.zone())
	return time.Date(s.Year(), s.Month(), s.Day()+1, 0, 0, 0, 0, s.Location())
}

func (d *day) zone() *time.Location {
	if d.loc == nil {
		return time.UTC
	}
	return d.loc
}
