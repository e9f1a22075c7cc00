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
)

// The checks' names.
const (
	checkP50 = "added p50"
	checkCPU = "CPU per request"
	checkP99 = "added p99"
)

// The target the checks hold the gateway to, for two cores.
const (
	// p50Factor bounds the gateway's added p50 as a multiple of the bare
	// proxy's.
	p50Factor = 1.4
	// cpuFactor bounds the gateway's CPU per request as a multiple of the
	// bare proxy's.
	cpuFactor = 1.2
	// p99Limit bounds the gateway's added p99; it must stay under it.
	p99Limit = 2 * time.Millisecond
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
	// Checks are the gateway's figures at the highest rate against the
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
}

// Step is one rate against one target for one round.
type Step struct {
	// Round counts from 1.
	Round  int    `json:"round"`
	Rate   int    `json:"rate"`
	Target Target `json:"target"`
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

	// latencies are the answered requests', ascending.
	latencies []time.Duration
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

// Result is every round of one rate against one target.
type Result struct {
	Rate   int    `json:"rate"`
	Target Target `json:"target"`
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
}

// Check is one of the gateway's figures against the target.
type Check struct {
	// Name is what is checked, such as "added p50".
	Name string `json:"name"`
	// Rule is the bound, such as "at most 1.4 × the bare proxy's".
	Rule string `json:"rule"`
	// Rate is the rate the figures are from.
	Rate int `json:"rate"`
	// Measured is false when the figures are missing; then Pass is false.
	Measured bool `json:"measured"`
	// GatewaySeconds is the gateway's figure.
	GatewaySeconds float64 `json:"gatewaySeconds"`
	// ProxySeconds is the bare proxy's figure; nil for a fixed bound.
	ProxySeconds *float64 `json:"proxySeconds,omitempty"`
	// LimitSeconds is the bound the gateway's figure is held to.
	LimitSeconds float64 `json:"limitSeconds"`
	Pass         bool    `json:"pass"`
}

// results puts each rate's steps for each target together, rates and
// targets in the order given.
func results(steps []Step, rates []int, targets []Target) []Result {
	var out []Result
	for _, rate := range rates {
		stub := merge(steps, rate, Stub)
		for _, t := range targets {
			r := merge(steps, rate, t)
			if t != Stub && r.Answered > 0 && stub.Answered > 0 {
				r.AddedP50Seconds = new(r.P50Seconds - stub.P50Seconds)
				r.AddedP99Seconds = new(r.P99Seconds - stub.P99Seconds)
			}
			out = append(out, r)
		}
	}
	return out
}

// merge is the result of the steps at rate against t.
func merge(steps []Step, rate int, t Target) Result {
	r := Result{Rate: rate, Target: t}
	var latencies []time.Duration
	var cpu float64
	for _, s := range steps {
		if s.Rate != rate || s.Target != t {
			continue
		}
		r.Counts = r.Counts.plus(s.Counts)
		r.Spans += s.Spans
		cpu += s.CPUSeconds
		latencies = append(latencies, s.latencies...)
	}
	slices.Sort(latencies)
	r.P50Seconds = labrun.Percentile(latencies, 50).Seconds()
	r.P99Seconds = labrun.Percentile(latencies, 99).Seconds()
	if t != Stub && r.Answered > 0 {
		r.CPUSecondsPerRequest = new(cpu / float64(r.Answered))
	}
	return r
}

// checks holds the gateway's results at rate to the target.
func checks(rs []Result, rate int) []Check {
	gw, px := find(rs, rate, Gateway), find(rs, rate, Proxy)
	return []Check{
		relative(checkP50, rate, gw.AddedP50Seconds, px.AddedP50Seconds, p50Factor),
		relative(checkCPU, rate, gw.CPUSecondsPerRequest, px.CPUSecondsPerRequest, cpuFactor),
		under(checkP99, rate, gw.AddedP99Seconds, p99Limit),
	}
}

// find is the result of t at rate; the zero Result, with nothing
// measured, if there is none.
func find(rs []Result, rate int, t Target) Result {
	for _, r := range rs {
		if r.Rate == rate && r.Target == t {
			return r
		}
	}
	return Result{}
}

// relative checks that the gateway's figure is at most factor times the
// bare proxy's.
func relative(name string, rate int, gateway, proxy *float64, factor float64) Check {
	c := Check{Name: name, Rule: fmt.Sprintf("at most %.1f × the bare proxy's", factor), Rate: rate}
	if gateway == nil || proxy == nil {
		return c
	}
	c.Measured, c.GatewaySeconds, c.ProxySeconds = true, *gateway, proxy
	c.LimitSeconds = factor * *proxy
	c.Pass = c.GatewaySeconds <= c.LimitSeconds
	return c
}

// under checks that the gateway's figure is under limit.
func under(name string, rate int, gateway *float64, limit time.Duration) Check {
	c := Check{Name: name, Rule: "under " + limit.String(), Rate: rate, LimitSeconds: limit.Seconds()}
	if gateway == nil {
		return c
	}
	c.Measured, c.GatewaySeconds = true, *gateway
	c.Pass = c.GatewaySeconds < c.LimitSeconds
	return c
}
