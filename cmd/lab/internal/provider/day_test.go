package provider

import (
	"testing"
	"time"
)

func TestDay(t *testing.T) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	type step struct {
		at   string // RFC 3339
		want time.Duration
	}
	tests := []struct {
		name  string
		steps []step // each admits one request, if it fits
	}{{
		name: "the day ends at midnight Pacific time",
		steps: []step{
			{at: "2026-01-14T23:00:00-08:00"},
			{at: "2026-01-14T23:30:00-08:00"},
			{at: "2026-01-14T23:59:30-08:00", want: 30 * time.Second},
			{at: "2026-01-15T07:59:59Z", want: time.Second}, // the same moment in UTC
			{at: "2026-01-15T00:00:00-08:00"},
		},
	}, {
		name: "a spring day has 23 hours",
		steps: []step{
			{at: "2026-03-08T00:30:00-08:00"},
			{at: "2026-03-08T00:31:00-08:00"},
			{at: "2026-03-08T01:00:00-08:00", want: 22 * time.Hour}, // to 00:00 PDT on the 9th
			{at: "2026-03-09T00:00:00-07:00"},
		},
	}, {
		name: "an autumn day has 25 hours",
		steps: []step{
			{at: "2026-11-01T00:00:00-07:00"},
			{at: "2026-11-01T00:00:00-07:00"},
			{at: "2026-11-01T00:00:00-07:00", want: 25 * time.Hour},
			{at: "2026-11-02T00:00:00-08:00"},
		},
	}, {
		name: "time that jumps back to the day before stays in the day",
		steps: []step{
			{at: "2026-01-15T00:10:00-08:00"},
			{at: "2026-01-14T23:50:00-08:00"},
			{at: "2026-01-15T00:20:00-08:00", want: 23*time.Hour + 40*time.Minute},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := day{loc: pacific}
			for i, st := range tc.steps {
				now := at(st.at)
				d.roll(now)
				got := d.wait(now, 2)
				if got != st.want {
					t.Errorf("step %d at %s: wait = %v; want %v", i, st.at, got, st.want)
				}
				if got == 0 {
					d.n++
				}
			}
		})
	}
}

func TestDayWithoutLimit(t *testing.T) {
	var d day
	d.roll(t0)
	d.n = 1_000_000
	if got := d.wait(t0, 0); got != 0 {
		t.Errorf("wait with no limit = %v; want 0", got)
	}
}
