package overhead

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sampleReport is a run at one rate, whose gateway passes on latency and
// fails on CPU, with a late request.
func sampleReport() Report {
	return Report{
		Settings:    Settings{Rates: []int{2000}, StepSeconds: 10, Rounds: 3, WarmupSeconds: 2, Workers: 128, CPUs: 2},
		LoadAverage: LoadAverage{Start: "0.50 0.40 0.30", End: "1.90 0.80 0.40"},
		Results: []Result{
			{Shape: ShapeChat, Rate: 2000, Target: Stub, Counts: Counts{Requests: 60000, Answered: 60000}, P50Seconds: 0.000_200, P99Seconds: 0.000_900, CallsPerSecond: 2000},
			{Shape: ShapeChat, Rate: 2000, Target: Proxy, Counts: Counts{Requests: 60000, Answered: 60000}, P50Seconds: 0.000_300, P99Seconds: 0.001_100,
				AddedP50Seconds: new(0.000_100), AddedP99Seconds: new(0.000_200), CPUSecondsPerRequest: new(0.000_050),
				CallsPerSecond: 2000, CPUBusy: 0.1},
			{Shape: ShapeChat, Rate: 2000, Target: Gateway, Counts: Counts{Requests: 60000, Answered: 60000, Late: 3}, P50Seconds: 0.000_320, P99Seconds: 0.000_800,
				AddedP50Seconds: new(0.000_120), AddedP99Seconds: new(-0.000_100), CPUSecondsPerRequest: new(0.000_070),
				CallsPerSecond: 2000, CPUBusy: 0.14},
			{Shape: ShapeChat, Connections: 64, Target: Gateway, Counts: Counts{Requests: 90000, Answered: 90000}, P50Seconds: 0.000_700, P99Seconds: 0.002,
				AddedP50Seconds: new(0.000_300), AddedP99Seconds: new(0.001), CPUSecondsPerRequest: new(0.000_033),
				CallsPerSecond: 3000, ProxyShare: new(0.75), CPUBusy: 0.99, MemoryPerCallBytes: new(20480.0)},
		},
		Soak: &Soak{Shape: ShapeChat, Target: Gateway, Rate: 2400, RateFrom: "80% of the 3000 calls a second the gateway served on 64 conns", Seconds: 15,
			Counts: Counts{Requests: 36000, Answered: 36000},
			Samples: []SoakSample{
				{Seconds: 5, RSSBytes: 40 << 20, HeapInuseBytes: 12 << 20, Goroutines: 150, Counts: Counts{Requests: 12000, Answered: 12000}, P99Seconds: 0.001},
				{Seconds: 10, RSSBytes: 41 << 20, HeapInuseBytes: 13 << 20, Goroutines: 151, Counts: Counts{Requests: 12000, Answered: 12000}, P99Seconds: 0.0012},
				{Seconds: 15, RSSBytes: 41 << 20, Counts: Counts{Requests: 12000, Answered: 12000}, P99Seconds: 0.0011},
			}},
		Checks: []Check{
			{Name: checkP50, Rule: "at most 1.4 × the bare proxy's", Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_120, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140, Pass: true},
			{Name: checkCPU, Rule: "at most 1.2 × the bare proxy's", Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_070, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060},
			{Name: checkP99, Rule: "at most 1.5 × the bare proxy's or 2ms, whichever is more", Shape: ShapeChat, Rate: 2000, Target: Gateway},
			{Name: checkCapacity, Rule: "at least 0.8 of the bare proxy's", Shape: ShapeChat, Connections: 64, Target: Gateway, Measured: true, Share: 0.75, MinShare: 0.8},
			{Name: checkMemory, Rule: "at most 64 KiB beyond its body", Shape: ShapeChat, Connections: 64, Target: Gateway, Measured: true, GatewayBytes: 20480, LimitBytes: 64 << 10, Pass: true},
			{Name: checkFlatHeap, Rule: "at most 1.1 × its mean over the second third", Shape: ShapeChat, Rate: 2400, Target: Gateway, Measured: true, Ratio: 1.05, MaxRatio: 1.1, Pass: true},
		},
	}
}

func TestWriteTable(t *testing.T) {
	var out bytes.Buffer
	if err := sampleReport().WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := `shape  load      target   answered     failed  late  p50      p99      added p50  added p99  CPU/request  calls/s  calls/CPU-s  × proxy  CPU busy  memory/call
chat   2000/s    stub     60000/60000  0       0     0.200ms  0.900ms  -          -          -            2000     0            -        0%        -
chat   2000/s    proxy    60000/60000  0       0     0.300ms  1.100ms  +0.100ms   +0.200ms   50.0µs       2000     0            -        10%       -
chat   2000/s    gateway  60000/60000  0       3     0.320ms  0.800ms  +0.120ms   -0.100ms   70.0µs       2000     0            -        14%       -
chat   64 conns  gateway  90000/90000  0       0     0.700ms  2.000ms  +0.300ms   +1.000ms   33.0µs       3000     0            0.75     99%       20.0KiB
note: chat 2000/s gateway: the load generator fell behind: 3 requests found every worker busy when due
soak: chat at 2400/s (80% of the 3000 calls a second the gateway served on 64 conns) to the gateway for 15s, answered 36000/36000, failed 0, late 0
soak     chat          2400/s    gateway  at    5.0s  answered  12000/12000   failed    0  late    0  p99 1.000ms  RSS 40.0MiB  heap in use 12.0MiB  goroutines 150
soak     chat          2400/s    gateway  at   10.0s  answered  12000/12000   failed    0  late    0  p99 1.200ms  RSS 41.0MiB  heap in use 13.0MiB  goroutines 151
soak     chat          2400/s    gateway  at   15.0s  answered  12000/12000   failed    0  late    0  p99 1.100ms  RSS 41.0MiB  heap in use -  goroutines 0
load average 0.50 0.40 0.30 at the start, 1.90 0.80 0.40 at the end, on 2 CPUs
pass  chat at 2000/s, the gateway's added p50 0.120ms must be at most 1.4 × the bare proxy's (0.100ms): 0.140ms
FAIL  chat at 2000/s, the gateway's CPU per request 70.0µs must be at most 1.2 × the bare proxy's (50.0µs): 60.0µs
FAIL  chat at 2000/s, the gateway's added p99: not measured
FAIL  chat at 64 conns, the gateway's capacity 0.75 must be at least 0.8 of the bare proxy's
pass  chat at 64 conns, the gateway's memory a call in flight 20.0KiB must be at most 64 KiB beyond its body (the bare proxy's: -)
pass  chat at 2400/s, the gateway's mean heap in use over the soak's last third must be at most 1.1 × its mean over the second third: 1.05 ×
`
	if diff := cmp.Diff(out.String(), want); diff != "" {
		t.Errorf("table (-got +want):\n%s", diff)
	}
}

// TestWriteTableOfATracedGateway writes, after the table, what the gateway traced at 100% sent
// and took beyond the untraced gateway.
func TestWriteTableOfATracedGateway(t *testing.T) {
	rep := sampleReport()
	rep.Results = append(rep.Results, Result{Shape: ShapeChat, Rate: 2000, Target: tracedTarget(1), Counts: Counts{Requests: 60000, Answered: 60000},
		P50Seconds: 0.000_350, P99Seconds: 0.000_900, AddedP50Seconds: new(0.000_150), AddedP99Seconds: new(0.0),
		CPUSecondsPerRequest: new(0.000_080), Spans: 240000})
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"chat   2000/s    gateway traced 100%  60000/60000  0       0     0.350ms  0.900ms  +0.150ms   +0.000ms   80.0µs       0        0            -        0%        -\n",
		"tracing: chat 2000/s gateway traced 100%: 240000 spans sent, 4.00 a request answered; CPU a request 80.0µs against 70.0µs untraced; p50 0.350ms against 0.320ms untraced\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the table has no line %q:\n%s", line, &out)
		}
	}
}

// TestNoteOfATargetThatDidNotGrow says why a process's memory a call is
// missing on closed loop, and says nothing of the stub's.
func TestNoteOfATargetThatDidNotGrow(t *testing.T) {
	closed := func(target Target) Result {
		return Result{Shape: ShapeLongPrompt, Connections: 64, Target: target, Counts: Counts{Requests: 100, Answered: 100}}
	}
	if got := note(closed(Stub)); got != "" {
		t.Errorf("note of the stub = %q; want none", got)
	}
	if got := note(closed(Proxy)); !strings.Contains(got, "its resident memory did not grow") {
		t.Errorf("note of a proxy that did not grow = %q; want it to say so", got)
	}
	grew := closed(Proxy)
	grew.MemoryPerCallBytes = new(1024.0)
	if got := note(grew); got != "" {
		t.Errorf("note of a proxy that grew = %q; want none", got)
	}
}
