package overhead

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labtest"
)

// gatewayBin is the gateway built once for the package's tests; empty
// with -short.
var gatewayBin string

// TestMain builds the gateway, unless -short. Run starts this test binary
// as the bare proxy (Options.Self is empty), so the binary serves it when
// its first argument is ProxyCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ProxyCommand {
		os.Exit(serveProxy(os.Args[2:]))
	}
	os.Exit(labtest.Main(m, &gatewayBin))
}

// serveProxy is what lab overhead-proxy does.
func serveProxy(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := RunProxy(ctx, args, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestRun runs the whole measurement, small: 100 requests a second for a
// second per target, once, with a gateway that traces every call beside
// the one that traces none, and a soak of six windows of 0.1 s. It
// asserts what a slow machine cannot change: every target was measured,
// every request answered, every check made, the traced gateway's spans
// received and none of the others', and every window of the soak sampled;
// never the timings.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary and a proxy process")
	}
	opts := DefaultOptions()
	opts.Rates, opts.Step, opts.Rounds, opts.Warmup = []int{100}, time.Second, 1, 0
	opts.Gateway, opts.Tracing, opts.Soak = gatewayBin, []float64{1}, 600*time.Millisecond
	targets := []Target{Stub, Proxy, Gateway, "gateway traced 100%"}
	var progress bytes.Buffer
	rep, err := Run(t.Context(), opts, &progress)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, &progress)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s\n%s", &progress, &table)
	if len(rep.Steps) != len(targets) || len(rep.Results) != len(targets) {
		t.Fatalf("%d steps and %d results; want one of each per target, %d", len(rep.Steps), len(rep.Results), len(targets))
	}
	for i, r := range rep.Results {
		if r.Target != targets[i] || r.Answered != 100 || r.Requests != 100 {
			t.Errorf("result %d: %s answered %d of %d; want %s answering all 100", i, r.Target, r.Answered, r.Requests, targets[i])
		}
		if r.Target != Stub && (r.AddedP50Seconds == nil || r.AddedP99Seconds == nil || r.CPUSecondsPerRequest == nil) {
			t.Errorf("%s: added p50 %v, added p99 %v, CPU per request %v; want all measured", r.Target, r.AddedP50Seconds, r.AddedP99Seconds, r.CPUSecondsPerRequest)
		}
		if traced := r.Target == targets[3]; traced != (r.Spans > 0) {
			t.Errorf("%s sent %d spans; want spans from the traced gateway only", r.Target, r.Spans)
		}
	}
	if len(rep.Checks) != 4 {
		t.Fatalf("%d checks; want 4, the last the soak's", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Measured || c.Rate != 100 {
			t.Errorf("check %q at %d/s measured %t; want measured at 100/s", c.Name, c.Rate, c.Measured)
		}
	}
	checkSoak(t, rep.Soak, 6, 10)
}

// checkSoak checks that a soak sampled the gateway after each of its
// windows, and that every call of each, calls of them, was answered.
func checkSoak(t *testing.T, s *Soak, windows, calls int) {
	t.Helper()
	if s == nil || len(s.Samples) != windows {
		t.Fatalf("soak %+v; want %d samples", s, windows)
	}
	for i, sample := range s.Samples {
		if sample.Answered != calls || sample.Requests != calls {
			t.Errorf("soak window %d answered %d of %d; want all %d", i, sample.Answered, sample.Requests, calls)
		}
		if sample.RSSBytes <= 0 || sample.HeapInuseBytes <= 0 || sample.Goroutines <= 0 {
			t.Errorf("soak sample %d: RSS %d, heap in use %d, goroutines %d; want each read", i, sample.RSSBytes, sample.HeapInuseBytes, sample.Goroutines)
		}
	}
}

// TestRunOnClosedLoop runs every shape of call, open-loop and on a closed
// loop of two connections, against a gateway in memory and one in Redis.
// It asserts that every shape, load and target was measured, every call
// answered, every capacity compared with the bare proxy's and every
// process's memory sampled on closed loop; never the timings.
func TestRunOnClosedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary, a proxy process and a redis-server")
	}
	opts := DefaultOptions()
	opts.Rates, opts.Step, opts.Rounds, opts.Warmup = []int{20}, 500*time.Millisecond, 1, 0
	opts.Gateway, opts.Connections, opts.Stores = gatewayBin, 2, []string{storeMemory, storeRedis}
	opts.Shapes = []string{ShapeChat, ShapeChatUncapped, ShapeStream, ShapeEmbeddings, ShapeLongPrompt}
	var progress bytes.Buffer
	rep, err := Run(t.Context(), opts, &progress)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, &progress)
	}
	if want := len(opts.Shapes) * 2 * 4; len(rep.Results) != want {
		t.Fatalf("%d results; want %d, one per shape, load and target", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		if r.Answered == 0 || r.Answered != r.Requests {
			t.Errorf("%s %s %s answered %d of %d; want every call answered", r.Shape, r.load(), r.Target, r.Answered, r.Requests)
		}
		if closedGateway := r.Connections > 0 && (r.Target == Gateway || r.Target == GatewayRedis); closedGateway != (r.ProxyShare != nil) {
			t.Errorf("%s %s %s: share of the proxy's %v; want one for each gateway on closed loop only", r.Shape, r.load(), r.Target, r.ProxyShare)
		}
	}
	for _, s := range rep.Steps {
		if sampled := s.Connections > 0 && s.Target != Stub; sampled != (s.IdleRSSBytes > 0 && s.PeakRSSBytes > 0) {
			t.Errorf("%s %s %s: resident memory %d before, %d at most; want both for each process on closed loop only",
				s.Shape, s.load(), s.Target, s.IdleRSSBytes, s.PeakRSSBytes)
		}
	}
	if want := len(opts.Shapes) * 7; len(rep.Checks) != want {
		t.Fatalf("%d checks; want %d, seven per shape", len(rep.Checks), want)
	}
	for _, c := range rep.Checks {
		// Two connections may fit in memory the process already holds: a
		// memory check is measured only when its target grew.
		grew := find(rep.Results, key{c.Shape, c.Rate, c.Connections, c.Target}).MemoryPerCallBytes != nil
		if c.Measured != (c.Name != checkMemory || grew) {
			t.Errorf("check %s %q of %s measured %t", c.Shape, c.Name, c.Target, c.Measured)
		}
	}
}

func TestRunRefusesAMissingGateway(t *testing.T) {
	opts := DefaultOptions()
	opts.Gateway = filepath.Join(t.TempDir(), "no-gateway")
	if _, err := Run(t.Context(), opts, &bytes.Buffer{}); err == nil {
		t.Error("Run with no gateway binary = nil error; want one")
	}
}
