package overhead

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const ms1 = time.Millisecond

// approx compares the floats that percentiles and divisions make.
var approx = cmpopts.EquateApprox(0, 1e-9)

// stepOf is a step whose answered requests took latencies, with cpu
// seconds of its target's process.
func stepOf(round, rate int, t Target, cpu float64, latencies ...time.Duration) Step {
	return Step{Round: round, Shape: ShapeChat, Rate: rate, Target: t, Counts: Counts{Requests: len(latencies), Answered: len(latencies)}, CPUSeconds: cpu, latencies: latencies}
}

func TestResults(t *testing.T) {
	steps := []Step{
		stepOf(1, 500, Stub, 0, 1*ms1, 2*ms1),
		stepOf(1, 500, Proxy, 0.002, 2*ms1, 4*ms1),
		stepOf(1, 500, Gateway, 0.004, 3*ms1, 6*ms1),
		// The second round: a failure, and a late request at the gateway.
		stepOf(2, 500, Stub, 0, 3*ms1, 4*ms1),
		stepOf(2, 500, Proxy, 0.002, 5*ms1, 6*ms1),
		{Round: 2, Shape: ShapeChat, Rate: 500, Target: Gateway, Counts: Counts{Requests: 3, Answered: 2, Failed: 1, Late: 1, Queued: 1}, CPUSeconds: 0.004, latencies: []time.Duration{7 * ms1, 9 * ms1}},
	}
	got := results(steps, []string{ShapeChat}, []int{500, 2000}, 0, []Target{Stub, Proxy, Gateway})
	want := []Result{
		{Shape: ShapeChat, Rate: 500, Target: Stub, Counts: Counts{Requests: 4, Answered: 4}, P50Seconds: 0.002, P99Seconds: 0.004},
		{Shape: ShapeChat, Rate: 500, Target: Proxy, Counts: Counts{Requests: 4, Answered: 4}, P50Seconds: 0.004, P99Seconds: 0.006,
			AddedP50Seconds: new(0.002), AddedP99Seconds: new(0.002), CPUSecondsPerRequest: new(0.001), CallsPerCPUSecond: 1000},
		{Shape: ShapeChat, Rate: 500, Target: Gateway, Counts: Counts{Requests: 5, Answered: 4, Failed: 1, Late: 1, Queued: 1}, P50Seconds: 0.006, P99Seconds: 0.009,
			AddedP50Seconds: new(0.004), AddedP99Seconds: new(0.005), CPUSecondsPerRequest: new(0.002), CallsPerCPUSecond: 500},
		// Not run: nothing measured, nothing added.
		{Shape: ShapeChat, Rate: 2000, Target: Stub},
		{Shape: ShapeChat, Rate: 2000, Target: Proxy},
		{Shape: ShapeChat, Rate: 2000, Target: Gateway},
	}
	if diff := cmp.Diff(got, want, approx); diff != "" {
		t.Errorf("results (-got +want):\n%s", diff)
	}
}

// TestResultsOfATracedGateway puts a traced gateway's steps together after the untraced one's,
// with the spans it sent.
func TestResultsOfATracedGateway(t *testing.T) {
	traced := tracedTarget(0.01)
	first, second := stepOf(1, 500, traced, 0.003, 2*ms1), stepOf(2, 500, traced, 0.005, 4*ms1)
	first.Spans, second.Spans = 4, 8
	steps := []Step{stepOf(1, 500, Stub, 0, 1*ms1), stepOf(1, 500, Gateway, 0.002, 2*ms1), first, second}
	got := results(steps, []string{ShapeChat}, []int{500}, 0, []Target{Stub, Proxy, Gateway, traced})
	want := Result{Shape: ShapeChat, Rate: 500, Target: "gateway traced 1%", Counts: Counts{Requests: 2, Answered: 2}, P50Seconds: 0.002, P99Seconds: 0.004,
		AddedP50Seconds: new(0.001), AddedP99Seconds: new(0.003), CPUSecondsPerRequest: new(0.004), Spans: 12,
		CallsPerCPUSecond: (1/0.003 + 1/0.005) / 2}
	if len(got) != 4 {
		t.Fatalf("%d results; want one for each of the four targets", len(got))
	}
	if diff := cmp.Diff(got[3], want, approx); diff != "" {
		t.Errorf("the traced gateway's result (-got +want):\n%s", diff)
	}
}

// TestResultsOnClosedLoop gives each round's calls a second and a CPU-second, their medians, and
// the gateway's capacity as the median of its rounds' shares of the proxy's calls a CPU-second.
func TestResultsOnClosedLoop(t *testing.T) {
	closed := func(round int, target Target, answered int, cpu float64) Step {
		return Step{Round: round, Shape: ShapeChat, Connections: 64, Target: target, Seconds: 10, CPUSeconds: cpu,
			Counts: Counts{Requests: answered, Answered: answered}}
	}
	steps := []Step{
		closed(1, Proxy, 300_000, 10), closed(1, Gateway, 200_000, 10), // shares 0.67,
		closed(2, Proxy, 200_000, 5), closed(2, Gateway, 160_000, 5), // 0.8
		closed(3, Proxy, 300_000, 10), closed(3, Gateway, 270_000, 10), // and 0.9
	}
	got := results(steps, []string{ShapeChat}, []int{2000}, 64, []Target{Proxy, Gateway})
	if len(got) != 4 {
		t.Fatalf("%d results; want 4, two loads of two targets", len(got))
	}
	want := []Result{
		{Shape: ShapeChat, Connections: 64, Target: Proxy, Counts: Counts{Requests: 800_000, Answered: 800_000},
			CPUSecondsPerRequest: new(25.0 / 800_000), CallsPerSecond: 30_000, CallsPerCPUSecond: 30_000, CPUBusy: 25.0 / 30},
		{Shape: ShapeChat, Connections: 64, Target: Gateway, Counts: Counts{Requests: 630_000, Answered: 630_000},
			CPUSecondsPerRequest: new(25.0 / 630_000), CallsPerSecond: 20_000, CallsPerCPUSecond: 27_000, ProxyShare: new(0.8), CPUBusy: 25.0 / 30},
	}
	if diff := cmp.Diff(got[2:], want, approx); diff != "" {
		t.Errorf("closed-loop results (-got +want):\n%s", diff)
	}
}

func TestResultsWithoutTheStub(t *testing.T) {
	got := results([]Step{stepOf(1, 500, Gateway, 0.001, 1*ms1)}, []string{ShapeChat}, []int{500}, 0, []Target{Stub, Proxy, Gateway})
	if g := got[2]; g.AddedP50Seconds != nil || g.AddedP99Seconds != nil || g.CPUSecondsPerRequest == nil {
		t.Errorf("the gateway's result without the stub's = %+v; want CPU per request, and nothing added", g)
	}
}

func TestChecks(t *testing.T) {
	// at is the results at 2000/s of a proxy and a gateway that added p50,
	// p99 and CPU per request as given, in seconds.
	at := func(proxyP50, proxyP99, proxyCPU, gatewayP50, gatewayP99, gatewayCPU float64) []Result {
		return []Result{
			{Shape: ShapeChat, Rate: 2000, Target: Stub},
			{Shape: ShapeChat, Rate: 2000, Target: Proxy, AddedP50Seconds: new(proxyP50), AddedP99Seconds: new(proxyP99), CPUSecondsPerRequest: new(proxyCPU)},
			{Shape: ShapeChat, Rate: 2000, Target: Gateway, AddedP50Seconds: new(gatewayP50), AddedP99Seconds: new(gatewayP99), CPUSecondsPerRequest: new(gatewayCPU)},
		}
	}
	const (
		p50Rule = "at most 1.4 × the bare proxy's"
		cpuRule = "at most 1.2 × the bare proxy's"
		p99Rule = "at most 1.5 × the bare proxy's or 2ms, whichever is more"
	)
	// p99 is the added p99's check of a gateway and a proxy that added
	// these, held to limit.
	p99 := func(gateway, proxy, limit float64, pass bool) Check {
		return Check{Name: "added p99", Rule: p99Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true,
			GatewaySeconds: gateway, ProxySeconds: new(proxy), LimitSeconds: limit, Pass: pass}
	}
	tests := []struct {
		name    string
		results []Result
		want    []Check
	}{{
		name:    "all within",
		results: at(0.000_100, 0.002, 0.000_050, 0.000_120, 0.002_500, 0.000_055),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_120, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140, Pass: true},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_055, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060, Pass: true},
			p99(0.002_500, 0.002, 0.003, true),
		},
	}, {
		name:    "all over",
		results: at(0.000_100, 0.002, 0.000_050, 0.000_150, 0.003_500, 0.000_070),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_150, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_070, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060},
			p99(0.003_500, 0.002, 0.003, false),
		},
	}, {
		name:    "at the bounds, which pass",
		results: at(0.000_100, 0.002, 0.000_050, 0.000_140, 0.003, 0.000_060),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_140, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140, Pass: true},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_060, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060, Pass: true},
			p99(0.003, 0.002, 0.003, true),
		},
	}, {
		name:    "a bare proxy that added nothing holds the gateway's p50 to nothing, its p99 to 2ms",
		results: at(0, 0, 0.000_050, 0.000_010, 0.002, 0.000_050),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_010, ProxySeconds: new(0.0), LimitSeconds: 0},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_050, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060, Pass: true},
			p99(0.002, 0, 0.002, true),
		},
	}, {
		name:    "past 2ms when the bare proxy added a little to its p99",
		results: at(0.000_100, 0.001, 0.000_050, 0.000_100, 0.002_100, 0.000_050),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_100, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140, Pass: true},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_050, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060, Pass: true},
			p99(0.002_100, 0.001, 0.002, false),
		},
	}, {
		name:    "a bare proxy faster than the stub alone at p99",
		results: at(0.000_100, -0.000_500, 0.000_050, 0.000_100, 0.001, 0.000_050),
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_100, ProxySeconds: new(0.000_100), LimitSeconds: 0.000_140, Pass: true},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway, Measured: true, GatewaySeconds: 0.000_050, ProxySeconds: new(0.000_050), LimitSeconds: 0.000_060, Pass: true},
			p99(0.001, -0.000_500, 0.002, true),
		},
	}, {
		name:    "not measured at that rate fails",
		results: []Result{{Shape: ShapeChat, Rate: 500, Target: Gateway, AddedP50Seconds: new(0.0)}},
		want: []Check{
			{Name: "added p50", Rule: p50Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway},
			{Name: "CPU per request", Rule: cpuRule, Shape: ShapeChat, Rate: 2000, Target: Gateway},
			{Name: "added p99", Rule: p99Rule, Shape: ShapeChat, Rate: 2000, Target: Gateway},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(checks(tc.results, []string{ShapeChat}, 2000, 0), tc.want, approx); diff != "" {
				t.Errorf("checks (-got +want):\n%s", diff)
			}
		})
	}
}

// TestResultsOfMemory gives, on closed loop, the most over the rounds of a
// target's growth in resident memory over its connections, less the
// call's body; nothing for the stub, whose memory is this process's,
// open-loop, or for a target that did not grow.
func TestResultsOfMemory(t *testing.T) {
	body := float64(bodyBytes(ShapeChat))
	closed := func(round int, target Target, idle, peak int64) Step {
		return Step{Round: round, Shape: ShapeChat, Connections: 64, Target: target, Seconds: 10, CPUSeconds: 1,
			Counts: Counts{Requests: 1000, Answered: 1000}, IdleRSSBytes: idle, PeakRSSBytes: peak}
	}
	steps := []Step{
		closed(1, Stub, 0, 0),
		closed(1, Proxy, 10<<20, 11<<20), // 16 KiB a connection
		closed(1, Gateway, 20<<20, 22<<20),
		closed(2, Proxy, 11<<20, 11<<20),   // no growth: not known
		closed(2, Gateway, 22<<20, 25<<20), // 48 KiB a connection: the most
		// Serving its calls from memory an earlier step grew it by.
		closed(1, GatewayRedis, 30<<20, 30<<20),
		closed(2, GatewayRedis, 30<<20, 29<<20),
		stepOf(1, 2000, Gateway, 0.1, ms1),
	}
	got := results(steps, []string{ShapeChat}, []int{2000}, 64, []Target{Stub, Proxy, Gateway, GatewayRedis})
	want := map[key]*float64{
		{shape: ShapeChat, rate: 2000, target: Gateway}:           nil,
		{shape: ShapeChat, connections: 64, target: Stub}:         nil,
		{shape: ShapeChat, connections: 64, target: Proxy}:        new(16<<10 - body),
		{shape: ShapeChat, connections: 64, target: Gateway}:      new(48<<10 - body),
		{shape: ShapeChat, connections: 64, target: GatewayRedis}: nil,
	}
	for k, w := range want {
		if diff := cmp.Diff(find(got, k).MemoryPerCallBytes, w, approx); diff != "" {
			t.Errorf("%s %s %s: memory a call (-got +want):\n%s", k.shape, loadName(k.rate, k.connections), k.target, diff)
		}
	}
	if body <= 0 {
		t.Errorf("a chat's body is %v bytes; want some", body)
	}
}

// TestChecksOnClosedLoop holds each gateway's capacity to its share of the
// bare proxy's and its memory a call in flight to 64 KiB, the proxy's
// beside it.
func TestChecksOnClosedLoop(t *testing.T) {
	closed := func(target Target, share, memory *float64) Result {
		return Result{Shape: ShapeChat, Connections: 64, Target: target, ProxyShare: share, MemoryPerCallBytes: memory}
	}
	rs := []Result{
		closed(Proxy, nil, new(10_000.0)),
		closed(Gateway, new(0.9), new(float64(64<<10))),
		closed(GatewayRedis, new(0.5), new(70_000.0)),
	}
	got := checks(rs, []string{ShapeChat}, 2000, 64)[3:]
	rule := "at most 64 KiB beyond its body"
	want := []Check{
		{Name: checkCapacity, Rule: "at least 0.8 of the bare proxy's", Shape: ShapeChat, Connections: 64, Target: Gateway, Measured: true, Share: 0.9, MinShare: 0.8, Pass: true},
		{Name: checkMemory, Rule: rule, Shape: ShapeChat, Connections: 64, Target: Gateway, Measured: true, GatewayBytes: 64 << 10, ProxyBytes: new(10_000.0), LimitBytes: 64 << 10, Pass: true},
		{Name: checkCapacity, Rule: "at least 0.6 of the bare proxy's", Shape: ShapeChat, Connections: 64, Target: GatewayRedis, Measured: true, Share: 0.5, MinShare: 0.6},
		{Name: checkMemory, Rule: rule, Shape: ShapeChat, Connections: 64, Target: GatewayRedis, Measured: true, GatewayBytes: 70_000, ProxyBytes: new(10_000.0), LimitBytes: 64 << 10},
	}
	if diff := cmp.Diff(got, want, approx); diff != "" {
		t.Errorf("closed-loop checks (-got +want):\n%s", diff)
	}
	unmeasured := checks([]Result{closed(Gateway, nil, nil)}, []string{ShapeChat}, 2000, 64)[4]
	if unmeasured.Name != checkMemory || unmeasured.Measured || unmeasured.Pass || unmeasured.ProxyBytes != nil {
		t.Errorf("the memory check of a gateway whose memory was not sampled = %+v; want it not measured, and failed", unmeasured)
	}
}
