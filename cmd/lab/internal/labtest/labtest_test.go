package labtest

import (
	"flag"
	"testing"
	"time"
)

// options is a run's options, as small as ParseFlags needs.
type options struct {
	step  time.Duration
	cases int
}

// AddFlags registers -step and -cases.
func (o *options) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.step, "step", o.step, "a step")
	fs.IntVar(&o.cases, "cases", o.cases, "cases")
}

func TestParseFlags(t *testing.T) {
	got, err := ParseFlags(options{step: time.Second, cases: 5}, "-step", "2s")
	if err != nil || got != (options{step: 2 * time.Second, cases: 5}) {
		t.Errorf("ParseFlags(-step 2s) = %+v, %v; want step 2s and the other default kept", got, err)
	}
	if _, err := ParseFlags(options{}, "-cases", "many"); err == nil {
		t.Error("ParseFlags(-cases many) = nil error; want the FlagSet's")
	}
}
