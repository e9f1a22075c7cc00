package overhead

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// WriteTable writes the results as a table, one shape, load and target a row, then
// the checks, and a note for every result whose requests were not all
// answered in time.
func (r Report) WriteTable(w io.Writer) error {
	return labrun.WriteTable(w, tableHeader, r.Results, Result.row, r.footer())
}

// tableHeader is the table's first line, its cells separated by tabs.
const tableHeader = "shape\tload\ttarget\tanswered\tfailed\tlate\tp50\tp99\tadded p50\tadded p99\tCPU/request\tcalls/s\tcalls/CPU-s\t× proxy\tCPU busy\tmemory/call"

// row is the result's row of the table.
func (res Result) row() string {
	return fmt.Sprintf("%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%.0f%%\t%s",
		res.Shape, res.load(), res.Target, res.Answered, res.Requests, res.Failed, res.Late, ms(res.P50Seconds), ms(res.P99Seconds),
		added(res.AddedP50Seconds), added(res.AddedP99Seconds), micros(res.CPUSecondsPerRequest),
		res.CallsPerSecond, res.CallsPerCPUSecond, share(res.ProxyShare), 100*res.CPUBusy, kib(res.MemoryPerCallBytes))
}

// footer is what follows the table: the notes, the load and the checks.
func (r Report) footer() string {
	var s string
	for _, res := range r.Results {
		if n := note(res); n != "" {
			s += fmt.Sprintf("note: %s %s %s: %s\n", res.Shape, res.load(), res.Target, n)
		}
	}
	for _, res := range r.Results {
		if n := tracingNote(res, find(r.Results, key{res.Shape, res.Rate, res.Connections, Gateway})); n != "" {
			s += fmt.Sprintf("tracing: %s %s %s: %s\n", res.Shape, res.load(), res.Target, n)
		}
	}
	if r.Soak != nil {
		s += soakHeader(*r.Soak)
		for _, sample := range r.Soak.Samples {
			s += soakLine(*r.Soak, sample)
		}
	}
	s += fmt.Sprintf("load average %s at the start, %s at the end, on %d CPUs%s\n",
		orUnknown(r.LoadAverage.Start), orUnknown(r.LoadAverage.End), r.Settings.CPUs, pinning(r.Settings))
	for _, c := range r.Checks {
		s += c.String() + "\n"
	}
	return s
}

// pinning says where the processes ran, when the run pinned them.
func pinning(s Settings) string {
	if !s.Pinned {
		return ""
	}
	return fmt.Sprintf("; the load on CPU %d, each target on CPU %d", loadCPU, targetCPU)
}

// note says what went wrong with a result's requests; empty if nothing did.
func note(r Result) string {
	var s string
	if r.Late > 0 {
		s += fmt.Sprintf("the load generator fell behind: %d requests found every worker busy when due; ", r.Late)
	}
	if r.Failed > 0 || r.Unsent > 0 {
		s += fmt.Sprintf("%d requests failed and %d were never sent; ", r.Failed, r.Unsent)
	}
	if r.Queued > 0 {
		s += fmt.Sprintf("%d waited in the gateway's queue; ", r.Queued)
	}
	if r.Connections > 0 && r.Target != Stub && r.Answered > 0 && r.MemoryPerCallBytes == nil {
		s += "its resident memory did not grow: it held the calls in memory kept from earlier steps, so their memory is not measured " +
			"(run the shape alone, at rates that hold fewer calls in flight); "
	}
	if s == "" {
		return ""
	}
	return s[:len(s)-2]
}

// tracingNote says what a traced gateway's result took beyond the untraced gateway's, at the same
// rate: its spans, and the CPU a request and the p50 tracing added. Empty for a result that sent
// no spans.
func tracingNote(traced, untraced Result) string {
	if traced.Spans == 0 {
		return ""
	}
	s := fmt.Sprintf("%d spans sent, %.2f a request answered", traced.Spans, float64(traced.Spans)/float64(max(traced.Answered, 1)))
	if traced.CPUSecondsPerRequest != nil && untraced.CPUSecondsPerRequest != nil {
		s += fmt.Sprintf("; CPU a request %s against %s untraced", micros(traced.CPUSecondsPerRequest), micros(untraced.CPUSecondsPerRequest))
	}
	if untraced.Answered > 0 && traced.Answered > 0 {
		s += fmt.Sprintf("; p50 %s against %s untraced", ms(traced.P50Seconds), ms(untraced.P50Seconds))
	}
	return s
}

// String is the check as the table writes it, such as
//
//	pass  chat at 2000/s, the gateway's added p50 0.310ms must be at most 1.4 × the bare proxy's (0.250ms): 0.350ms
func (c Check) String() string {
	where := fmt.Sprintf("%s at %s, the %s's", c.Shape, loadName(c.Rate, c.Connections), c.Target)
	if !c.Measured {
		return fmt.Sprintf("FAIL  %s %s: not measured", where, c.Name)
	}
	verdict := "FAIL"
	if c.Pass {
		verdict = "pass"
	}
	switch c.Name {
	case checkCapacity:
		return fmt.Sprintf("%s  %s %s %.2f must be %s", verdict, where, c.Name, c.Share, c.Rule)
	case checkMemory:
		return fmt.Sprintf("%s  %s %s %s must be %s (the bare proxy's: %s)", verdict, where, c.Name, kib(&c.GatewayBytes), c.Rule, kib(c.ProxyBytes))
	case checkFlatHeap:
		return fmt.Sprintf("%s  %s mean heap in use over the soak's last third must be %s: %.2f ×", verdict, where, c.Rule, c.Ratio)
	}
	format := ms
	if c.Name == checkCPU {
		format = func(s float64) string { return micros(&s) }
	}
	rule := c.Rule
	if c.ProxySeconds != nil {
		rule += fmt.Sprintf(" (%s): %s", format(*c.ProxySeconds), format(c.LimitSeconds))
	}
	return fmt.Sprintf("%s  %s %s %s must be %s", verdict, where, c.Name, format(c.GatewaySeconds), rule)
}

// soakHeader is the line before the soak's samples.
func soakHeader(s Soak) string {
	return fmt.Sprintf("soak: %s at %d/s (%s) to the %s for %s, answered %d/%d, failed %d, late %d\n",
		s.Shape, s.Rate, s.RateFrom, s.Target, time.Duration(s.Seconds*float64(time.Second)), s.Answered, s.Requests, s.Failed, s.Late)
}

// soakLine is the line of one of the soak's samples.
func soakLine(s Soak, sample SoakSample) string {
	return fmt.Sprintf("soak     %-13s %-8s  %-7s  at %6.1fs  answered %6d/%-6d  failed %4d  late %4d  p99 %s  RSS %s  heap in use %s  goroutines %d\n",
		s.Shape, loadName(s.Rate, 0), s.Target, sample.Seconds, sample.Answered, sample.Requests, sample.Failed, sample.Late,
		ms(sample.P99Seconds), mib(sample.RSSBytes), mib(sample.HeapInuseBytes), sample.Goroutines)
}

// kib writes bytes in KiB; "-" for none.
func kib(b *float64) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fKiB", *b/(1<<10))
}

// mib writes bytes in MiB; "-" for none.
func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}

// share writes a share of the bare proxy's figure; "-" for none.
func share(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *s)
}

// ms writes seconds in milliseconds.
func ms(s float64) string { return fmt.Sprintf("%.3fms", s*1e3) }

// added writes an added latency with its sign; "-" for none.
func added(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%+.3fms", *s*1e3)
}

// micros writes CPU seconds in microseconds; "-" for none.
func micros(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", *s*1e6)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// WriteFile writes the report as JSON to path.
func (r Report) WriteFile(path string) error { return labrun.WriteJSON(path, r) }
