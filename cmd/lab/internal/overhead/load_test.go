package overhead

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMeasure(t *testing.T) {
	answered := func(latency, lag time.Duration) record {
		return record{sent: true, answered: true, latency: latency, lag: lag}
	}
	tests := []struct {
		name    string
		records []record
		want    Step
	}{{
		name:    "nothing due",
		records: nil,
		want:    Step{},
	}, {
		name: "answered, out of order",
		records: []record{
			answered(3*ms1, 0), answered(1*ms1, ms1/2), answered(2*ms1, 0), answered(4*ms1, 2*ms1),
		},
		want: Step{Counts: Counts{Requests: 4, Answered: 4}, P50Seconds: 0.002, P99Seconds: 0.004, SendLagP99Seconds: 0.002,
			latencies: []time.Duration{1 * ms1, 2 * ms1, 3 * ms1, 4 * ms1}},
	}, {
		name: "a failure has a lag but no latency; an unsent request has neither",
		records: []record{
			answered(1*ms1, 0),
			{sent: true, latency: 5 * time.Second, lag: 3 * ms1},
			{},
		},
		want: Step{Counts: Counts{Requests: 3, Answered: 1, Failed: 1, Unsent: 1}, P50Seconds: 0.001, P99Seconds: 0.001, SendLagP99Seconds: 0.003,
			latencies: []time.Duration{1 * ms1}},
	}, {
		name: "late and queued are counted, and their wait counts from when they were due",
		records: []record{
			{sent: true, answered: true, late: true, latency: 9 * ms1, lag: 8 * ms1},
			{sent: true, answered: true, queued: true, latency: 2 * ms1},
		},
		want: Step{Counts: Counts{Requests: 2, Answered: 2, Late: 1, Queued: 1}, P50Seconds: 0.002, P99Seconds: 0.009, SendLagP99Seconds: 0.008,
			latencies: []time.Duration{2 * ms1, 9 * ms1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(measure(tc.records), tc.want, cmp.AllowUnexported(Step{}), approx); diff != "" {
				t.Errorf("measure (-got +want):\n%s", diff)
			}
		})
	}
}
