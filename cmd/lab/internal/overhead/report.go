package overhead

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// Target is where a step's requests go.
type Target string

// The targets every run measures, in the order each round runs them; the traced gateways, when
// asked for, come after them (see Options.targets).
const (
	// Stub is the zero-delay upstream alone.
	Stub Target = "stub"
	// Proxy is a bare reverse proxy in front of the stub.
	Proxy Target = "proxy"
	// Gateway is the gateway in front of the stub, tracing nothing.
	Gateway Target = "gateway"
	// GatewayRedis is the same gateway keeping its limits in a Redis of the
	// run's own, when the run asks for it (Options.Stores).
	GatewayRedis Target = "gateway redis"
)

// The checks' names.
const (
	checkP50 = "added p50"
	checkCPU = "CPU per request"
	checkP99 = "added p99"
	// checkCapacity is the calls a CPU-second a target serves on closed
	// loop, as a share of the bare proxy's in the same round.
	checkCapacity = "capacity"
	// checkMemory is the memory a call in flight takes beyond its body,
	// on closed loop.
	checkMemory = "memory a call in flight"
	// checkFlatHeap is the soak's heap in use over its last third against
	// its second.
	checkFlatHeap = "flat heap"
)

// The target the checks hold the gateway to, for two cores.
const (
	// p50Factor bounds the gateway's added p50 as a multiple of the bare
	// proxy's.
	p50Factor = 1.4
	// cpuFactor bounds the gateway's CPU per request as a multiple of the
	// bare proxy's.
	cpuFactor = 1.2
	// p99Factor bounds the gateway's added p99 as a multiple of the bare
	// proxy's, unless that is less than p99Floor: a proxy whose added p99
	// is a few microseconds, or below zero as the stub's own p99 moves,
	// would otherwise hold the gateway to nothing a scheduler's hiccup
	// could not exceed.
	p99Factor = 1.5
	p99Floor  = 2 * time.Millisecond
	// maxMemoryPerCall bounds the memory, in bytes, a call in flight in
	// the gateway takes beyond its body.
	maxMemoryPerCall = 64 << 10
	// minCapacity and minCapacityRedis are the least share of the bare
	// proxy's calls a second, on closed loop, that the gateway must serve
	// with its limits in memory and in Redis.
	minCapacity      = 0.8
	minCapacityRedis = 0.6
)

// Report is what a run found.
type Report struct {
	// Settings are the options the run ran with.
	Settings Settings `json:"settings"`
	// LoadAverage is the machine's load when the run started and ended.
	LoadAverage LoadAverage `json:"loadAverage"`
	// Steps are the counted steps in the order they ran.
	Steps []Step `json:"steps"`
	// Results are all rounds of each rate and target together, by rate,
	// then in the order of the targets.
	Results []Result `json:"results"`
	// Soak is the gateway's memory over a long open-loop step after the
	// rounds; nil when the run had none (Options.Soak).
	Soak *Soak `json:"soak,omitempty"`
	// Checks are the gateway's figures, for each shape of call, at the
	// highest rate and on closed loop, and over the soak, against the
	// target.
	Checks []Check `json:"checks"`
}

// LoadAverage holds /proc/loadavg's 1, 5 and 15 minute figures, such as
// "2.83 3.06 2.61"; empty where they could not be read.
type LoadAverage struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Settings are the options a run ran with, and the machine.
type Settings struct {
	Rates         []int   `json:"rates"`
	StepSeconds   float64 `json:"stepSeconds"`
	Rounds        int     `json:"rounds"`
	WarmupSeconds float64 `json:"warmupSeconds"`
	Workers       int     `json:"workers"`
	CPUs          int     `json:"cpus"`
	// Pinned is true when the load ran on CPU 0 and the targets on CPU 1.
	Pinned bool `json:"pinned"`
	// Tracing are the shares of calls the traced gateways sampled.
	Tracing []float64 `json:"tracing,omitempty"`
	// Shapes are the shapes of call sent, each in steps of its own.
	Shapes []string `json:"shapes"`
	// Connections are the closed-loop steps' connections; zero for none.
	Connections int `json:"connections,omitempty"`
	// Stores are where the gateways kept their limits.
	Stores []string `json:"stores"`
	// SoakSeconds is the soak's length; zero for none.
	SoakSeconds float64 `json:"soakSeconds,omitempty"`
}

// Step is one shape of call at one load against one target for one round.
type Step struct {
	// Round counts from 1.
	Round int    `json:"round"`
	Shape string `json:"shape"`
	// Rate is the calls a second of an open-loop step; zero for a
	// closed-loop one.
	Rate int `json:"rate,omitempty"`
	// Connections are a closed-loop step's; zero for an open-loop one.
	Connections int    `json:"connections,omitempty"`
	Target      Target `json:"target"`
	// Seconds is the step's length.
	Seconds float64 `json:"seconds"`
	Counts
	// P50Seconds and P99Seconds are percentiles of the answered requests'
	// latency, from when each was due.
	P50Seconds float64 `json:"p50Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	// SendLagP99Seconds is the p99 of how late the sent requests left:
	// the load generator's own delay, timers included.
	SendLagP99Seconds float64 `json:"sendLagP99Seconds"`
	// CPUSeconds is the CPU time, user and system, the target's process
	// used during the step; zero for the stub, which is not counted.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Spans counts the spans a traced gateway sent during the step.
	Spans int64 `json:"spans,omitempty"`
	// IdleRSSBytes is a closed-loop step's target's resident memory just
	// before it, and PeakRSSBytes the most of it sampled during the step;
	// zero for an open-loop step and for the stub.
	IdleRSSBytes int64 `json:"idleRssBytes,omitempty"`
	PeakRSSBytes int64 `json:"peakRssBytes,omitempty"`

	// latencies are the answered requests', ascending.
	latencies []time.Duration
}

// load is how the step sent its calls, as the table names it.
func (s Step) load() string { return loadName(s.Rate, s.Connections) }

// callsPerSecond is the calls the step had answered a second.
func (s Step) callsPerSecond() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return float64(s.Answered) / s.Seconds
}

// callsPerCPUSecond is the calls the step had answered a second of its
// target's CPU time: the calls a core would serve, were it busy with
// nothing else. Zero for the stub, whose CPU time is not counted.
func (s Step) callsPerCPUSecond() float64 {
	if s.CPUSeconds <= 0 {
		return 0
	}
	return float64(s.Answered) / s.CPUSeconds
}

// loadName names a load: "2000/s" open-loop, "64 conns" closed-loop.
func loadName(rate, connections int) string {
	if connections > 0 {
		return fmt.Sprintf("%d conns", connections)
	}
	return fmt.Sprintf("%d/s", rate)
}

// Counts say what became of a step's requests, or of several steps'.
type Counts struct {
	// Requests were due: the rate times the step's length.
	Requests int `json:"requests"`
	// Answered are the requests answered 200 and read whole.
	Answered int `json:"answered"`
	// Failed are the requests answered another status, or not at all.
	Failed int `json:"failed"`
	// Unsent are the requests never sent: the step was cut off, having run
	// well past its length, or the run was interrupted.
	Unsent int `json:"unsent"`
	// Late are the requests that found every worker busy when they were
	// due: the load generator fell behind and sent them late. Their
	// latency still counts from when they were due.
	Late int `json:"late"`
	// Queued are the answers whose X-Sluice-Queue-Wait-Ms says the request
	// waited in the gateway's queue; with every limit high, none should.
	Queued int `json:"queued"`
}

// plus is c and d together.
func (c Counts) plus(d Counts) Counts {
	return Counts{
		Requests: c.Requests + d.Requests, Answered: c.Answered + d.Answered, Failed: c.Failed + d.Failed,
		Unsent: c.Unsent + d.Unsent, Late: c.Late + d.Late, Queued: c.Queued + d.Queued,
	}
}

// Result is every round of one shape at one load against one target.
type Result struct {
	Shape       string `json:"shape"`
	Rate        int    `json:"rate,omitempty"`
	Connections int    `json:"connections,omitempty"`
	Target      Target `json:"target"`
	Counts
	// P50Seconds and P99Seconds are percentiles of all rounds' latencies.
	P50Seconds float64 `json:"p50Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	// AddedP50Seconds and AddedP99Seconds are P50Seconds and P99Seconds
	// less the stub's at the same rate. Nil for the stub, and when either
	// has no answers.
	AddedP50Seconds *float64 `json:"addedP50Seconds,omitempty"`
	AddedP99Seconds *float64 `json:"addedP99Seconds,omitempty"`
	// CPUSecondsPerRequest is the CPU time of the target's process over
	// the requests it answered. Nil for the stub, and without answers.
	CPUSecondsPerRequest *float64 `json:"cpuSecondsPerRequest,omitempty"`
	// Spans counts the spans a traced gateway sent.
	Spans int64 `json:"spans,omitempty"`
	// CallsPerSecond is the median over the rounds of the calls answered
	// a second.
	CallsPerSecond float64 `json:"callsPerSecond"`
	// CallsPerCPUSecond is the median over the rounds of the calls
	// answered a second of the target's CPU time: on closed loop, the
	// calls one core serves, whether or not the load kept the core busy.
	CallsPerCPUSecond float64 `json:"callsPerCPUSecond"`
	// ProxyShare is the median over the rounds of CallsPerCPUSecond as a
	// share of the bare proxy's in the same round: on closed loop, the
	// target's capacity on one core against the proxy's. Nil for the stub
	// and the proxy, for an open-loop result, and when either answered
	// nothing.
	ProxyShare *float64 `json:"proxyShare,omitempty"`
	// CPUBusy is the target's CPU time over the steps' length: the share
	// of a core it used, near 1 when its core was the bottleneck.
	CPUBusy float64 `json:"cpuBusy"`
	// MemoryPerCallBytes is, on closed loop, the memory a call in flight
	// took beyond its body: the most over the rounds of the target's peak
	// resident memory during the step less its resident memory just
	// before it, over the connections, less the call's body. Nil for the
	// stub, for an open-loop result, and when no step sampled it or saw
	// the target grow.
	MemoryPerCallBytes *float64 `json:"memoryPerCallBytes,omitempty"`
}

// load is how the result's calls were sent, as the table names it.
func (r Result) load() string { return loadName(r.Rate, r.Connections) }

// Check is one of the gateway's figures against the target.
type Check struct {
	// Name is what is checked, such as "added p50".
	Name string `json:"name"`
	// Rule is the bound, such as "at most 1.4 × the bare proxy's".
	Rule string `json:"rule"`
	// Shape is the shape of call the figures are from.
	Shape string `json:"shape"`
	// Rate is the rate the figures are from; zero for closed loop.
	Rate int `json:"rate,omitempty"`
	// Connections are the closed loop's the figures are from.
	Connections int `json:"connections,omitempty"`
	// Target is the gateway checked.
	Target Target `json:"target"`
	// Measured is false when the figures are missing; then Pass is false.
	Measured bool `json:"measured"`
	// GatewaySeconds is the gateway's figure.
	GatewaySeconds float64 `json:"gatewaySeconds"`
	// ProxySeconds is the bare proxy's figure; nil for a fixed bound.
	ProxySeconds *float64 `json:"proxySeconds,omitempty"`
	// LimitSeconds is the bound the gateway's figure is held to.
	LimitSeconds float64 `json:"limitSeconds"`
	// Share and MinShare are, for the capacity check, the gateway's calls
	// a second as a share of the bare proxy's, and the least it may be.
	Share    float64 `json:"share,omitempty"`
	MinShare float64 `json:"minShare,omitempty"`
	// GatewayBytes, ProxyBytes and LimitBytes are, for the memory check,
	// the gateway's memory a call in flight beyond its body, the bare
	// proxy's (nil if not measured) and the bound.
	GatewayBytes float64  `json:"gatewayBytes,omitempty"`
	ProxyBytes   *float64 `json:"proxyBytes,omitempty"`
	LimitBytes   float64  `json:"limitBytes,omitempty"`
	// Ratio and MaxRatio are, for the flat-heap check, the soak's mean
	// heap in use over its last third as a multiple of its mean over its
	// second third, and the most it may be.
	Ratio    float64 `json:"ratio,omitempty"`
	MaxRatio float64 `json:"maxRatio,omitempty"`
	Pass     bool    `json:"pass"`
}

// key names the steps whose figures make one result.
type key struct {
	shape             string
	rate, connections int
	target            Target
}

func (k key) of(s Step) bool {
	return s.Shape == k.shape && s.Rate == k.rate && s.Connections == k.connections && s.Target == k.target
}

// with is k for target t.
func (k key) with(t Target) key { k.target = t; return k }

// results puts each shape's steps at each load for each target together:
// shapes, rates, then the closed loop of connections (none when zero), and
// targets in the order given.
func results(steps []Step, shapes []string, rates []int, connections int, targets []Target) []Result {
	loads := make([]key, 0, len(rates)+1)
	for _, rate := range rates {
		loads = append(loads, key{rate: rate})
	}
	if connections > 0 {
		loads = append(loads, key{connections: connections})
	}
	var out []Result
	for _, shape := range shapes {
		for _, l := range loads {
			l.shape = shape
			stub := merge(steps, l.with(Stub))
			for _, t := range targets {
				r := merge(steps, l.with(t))
				if t != Stub && r.Answered > 0 && stub.Answered > 0 {
					r.AddedP50Seconds = new(r.P50Seconds - stub.P50Seconds)
					r.AddedP99Seconds = new(r.P99Seconds - stub.P99Seconds)
				}
				if l.connections > 0 && t != Stub && t != Proxy {
					r.ProxyShare = proxyShare(steps, l.with(t))
				}
				out = append(out, r)
			}
		}
	}
	return out
}

// merge is the result of the steps k names.
func merge(steps []Step, k key) Result {
	r := Result{Shape: k.shape, Rate: k.rate, Connections: k.connections, Target: k.target}
	var latencies []time.Duration
	var cpu, seconds float64
	var perSecond, perCPUSecond []float64
	var perCall []float64
	for _, s := range steps {
		if !k.of(s) {
			continue
		}
		if m, ok := s.memoryPerCall(); ok {
			perCall = append(perCall, m)
		}
		r.Counts = r.Counts.plus(s.Counts)
		r.Spans += s.Spans
		cpu += s.CPUSeconds
		seconds += s.Seconds
		latencies = append(latencies, s.latencies...)
		perSecond = append(perSecond, s.callsPerSecond())
		perCPUSecond = append(perCPUSecond, s.callsPerCPUSecond())
	}
	slices.Sort(latencies)
	r.P50Seconds = labrun.Percentile(latencies, 50).Seconds()
	r.P99Seconds = labrun.Percentile(latencies, 99).Seconds()
	r.CallsPerSecond, r.CallsPerCPUSecond = median(perSecond), median(perCPUSecond)
	if seconds > 0 {
		r.CPUBusy = cpu / seconds
	}
	if k.target != Stub && r.Answered > 0 {
		r.CPUSecondsPerRequest = new(cpu / float64(r.Answered))
	}
	if len(perCall) > 0 {
		r.MemoryPerCallBytes = new(slices.Max(perCall))
	}
	return r
}

// memoryPerCall is the memory a call in flight took beyond its body in a
// closed-loop step: its target's growth in resident memory from just
// before the step to the most sampled during it, over the connections,
// less the call's body. It reports false for a step that sampled none,
// and for one whose target did not grow: a Go process keeps the memory an
// earlier step grew it by, and served this step's calls from it, so what
// they took is not known.
func (s Step) memoryPerCall() (float64, bool) {
	if s.Connections <= 0 || s.IdleRSSBytes <= 0 || s.PeakRSSBytes <= s.IdleRSSBytes {
		return 0, false
	}
	return float64(s.PeakRSSBytes-s.IdleRSSBytes)/float64(s.Connections) - float64(bodyBytes(s.Shape)), true
}

// bodyBytes is the length of the body of a call of the shape named; zero
// for a shape there is none of.
func bodyBytes(name string) int {
	shape, err := shapeNamed(name)
	if err != nil {
		return 0
	}
	return len(shape.body)
}

// proxyShare is the median over the rounds of the calls a CPU-second of
// the steps k names over the bare proxy's in the same round; nil when no
// round has both.
func proxyShare(steps []Step, k key) *float64 {
	var shares []float64
	for _, s := range steps {
		if !k.of(s) {
			continue
		}
		for _, p := range steps {
			if p.Round == s.Round && k.with(Proxy).of(p) && p.callsPerCPUSecond() > 0 && s.callsPerCPUSecond() > 0 {
				shares = append(shares, s.callsPerCPUSecond()/p.callsPerCPUSecond())
			}
		}
	}
	if len(shares) == 0 {
		return nil
	}
	return new(median(shares))
}

// median is the middle of xs, the mean of the two middle ones when
// there are as many on each side; zero for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid]
	}
	return (xs[mid-1] + xs[mid]) / 2
}

// checks holds the gateway's results for each shape, at rate and on the
// closed loop of connections (none when zero), to the target; the redis
// gateway's capacity too, when there is one.
func checks(rs []Result, shapes []string, rate, connections int) []Check {
	var out []Check
	for _, shape := range shapes {
		open := key{shape: shape, rate: rate}
		gw, px := find(rs, open.with(Gateway)), find(rs, open.with(Proxy))
		out = append(out,
			relative(checkP50, open.with(Gateway), gw.AddedP50Seconds, px.AddedP50Seconds, p50Factor),
			relative(checkCPU, open.with(Gateway), gw.CPUSecondsPerRequest, px.CPUSecondsPerRequest, cpuFactor),
			relativeWithFloor(checkP99, open.with(Gateway), gw.AddedP99Seconds, px.AddedP99Seconds, p99Factor, p99Floor))
		if connections == 0 {
			continue
		}
		closed := key{shape: shape, connections: connections}
		proxyMemory := find(rs, closed.with(Proxy)).MemoryPerCallBytes
		gateway := find(rs, closed.with(Gateway))
		out = append(out,
			capacity(closed.with(Gateway), gateway.ProxyShare, minCapacity),
			memory(closed.with(Gateway), gateway.MemoryPerCallBytes, proxyMemory, maxMemoryPerCall))
		if redis := find(rs, closed.with(GatewayRedis)); redis.Target != "" {
			out = append(out,
				capacity(closed.with(GatewayRedis), redis.ProxyShare, minCapacityRedis),
				memory(closed.with(GatewayRedis), redis.MemoryPerCallBytes, proxyMemory, maxMemoryPerCall))
		}
	}
	return out
}

// find is the result k names; the zero Result, with nothing measured, if
// there is none.
func find(rs []Result, k key) Result {
	for _, r := range rs {
		if r.Shape == k.shape && r.Rate == k.rate && r.Connections == k.connections && r.Target == k.target {
			return r
		}
	}
	return Result{}
}

// checkOf is a check, named name, by rule, of the figures k names.
func checkOf(name, rule string, k key) Check {
	return Check{Name: name, Rule: rule, Shape: k.shape, Rate: k.rate, Connections: k.connections, Target: k.target}
}

// relative checks that the gateway's figure is at most factor times the
// bare proxy's.
func relative(name string, gw key, gateway, proxy *float64, factor float64) Check {
	c := checkOf(name, fmt.Sprintf("at most %.1f × the bare proxy's", factor), gw)
	if gateway == nil || proxy == nil {
		return c
	}
	c.Measured, c.GatewaySeconds, c.ProxySeconds = true, *gateway, proxy
	c.LimitSeconds = factor * *proxy
	c.Pass = c.GatewaySeconds <= c.LimitSeconds
	return c
}

// relativeWithFloor checks that the gateway's figure is at most factor
// times the bare proxy's or floor, whichever is more.
func relativeWithFloor(name string, gw key, gateway, proxy *float64, factor float64, floor time.Duration) Check {
	c := checkOf(name, fmt.Sprintf("at most %.1f × the bare proxy's or %s, whichever is more", factor, floor), gw)
	if gateway == nil || proxy == nil {
		return c
	}
	c.Measured, c.GatewaySeconds, c.ProxySeconds = true, *gateway, proxy
	scaled := factor * *proxy
	c.LimitSeconds = max(scaled, floor.Seconds())
	c.Pass = c.GatewaySeconds <= c.LimitSeconds
	return c
}

// memory checks that the gateway gw names took at most limit bytes a call
// in flight beyond its body, on closed loop: gateway. The bare proxy's,
// proxy, is beside it, not part of the rule.
func memory(gw key, gateway, proxy *float64, limit int) Check {
	c := checkOf(checkMemory, fmt.Sprintf("at most %d KiB beyond its body", limit>>10), gw)
	c.LimitBytes, c.ProxyBytes = float64(limit), proxy
	if gateway == nil {
		return c
	}
	c.Measured, c.GatewayBytes = true, *gateway
	c.Pass = c.GatewayBytes <= c.LimitBytes
	return c
}

// capacity checks that the gateway gw names served at least least of the
// bare proxy's calls a CPU-second on closed loop: share.
func capacity(gw key, share *float64, least float64) Check {
	c := checkOf(checkCapacity, fmt.Sprintf("at least %.1f of the bare proxy's", least), gw)
	c.MinShare = least
	if share == nil {
		return c
	}
	c.Measured, c.Share = true, *share
	c.Pass = c.Share >= least
	return c
}
