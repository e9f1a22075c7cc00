// Command demo tells Sluice's whole story on one machine, on loopback: a local control plane
// (etcd, kube-apiserver, kube-controller-manager), Redis, the lab's simulated provider and
// inference server, the manager, two gateways sharing Redis and the metrics adapter. It applies
// the CRDs and samples, shows the quotas, runs the lab's queue case through the gateways, shows
// the hosted account's lower limits learned from its answers, an Anthropic account's three limits
// learned from its answers and kept, through Anthropic's Go SDK, sends the self-hosted model calls
// through the gateways until its HorizontalPodAutoscaler scales it on their queue, shows the
// quotas' live usage, and stops everything it started.
//
// `make demo` builds what it needs and runs it; DEMO_SHORT=1 (or -short) runs a shorter ramp
// and load, as the test of the demo does.
//
//	go run ./test/demo -bin bin -out bin/demo
//
// The binaries run as processes; the fake kubelet of test/cluster plays the inference Pods, each
// a `lab inference` process on its own loopback address.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// settings are what differs between the full demo and the short one.
type settings struct {
	users    string        // the ramp's users, one count per step
	step     time.Duration // between two counts
	pages    int           // in each user's book
	duration time.Duration // the ramp's cap, which its books finish well before
	load     time.Duration // the longest the self-hosted model is loaded
	settle   time.Duration // watched after the load, to see the HPA scale down
}

var (
	// The full ramp is the lab's (make demo-lab), with books of 5 pages rather than 20, so that its
	// 400 pages finish in about 75 s, well inside the cap.
	full  = settings{users: "1,2,3,5,8,12,20,30,50,80", step: 3 * time.Second, pages: 5, duration: 4 * time.Minute, load: 90 * time.Second, settle: 30 * time.Second}
	short = settings{users: "1,2,3,5", step: time.Second, pages: 10, duration: 30 * time.Second, load: 60 * time.Second}
)

func main() {
	testing.Init() // the harness asks testing.Short, which needs the testing flags
	isShort := flag.Bool("short", os.Getenv("DEMO_SHORT") != "", "a shorter ramp and load, for the demo's test (also DEMO_SHORT=1)")
	bin := flag.String("bin", "bin", "directory of the gateway, lab, manager and metrics-adapter binaries")
	out := flag.String("out", filepath.Join("bin", "demo"), "directory for the ramp's report and charts")
	flag.Parse()
	s := full
	if *isShort {
		s = short
	}
	os.Exit(demo(s, *bin, *out))
}

// demo runs the story and returns the exit code. A signal stops everything it started.
func demo(s settings, bin, out string) (code int) {
	r, err := newRun(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		r.Logf("interrupted; stopping everything")
		r.stop()
		os.Exit(130)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		r.stop()
		if r.Failed() {
			code = 1
		}
	}()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			r.Fatal(err)
		}
		return a
	}
	st := &story{r: r, s: s, bin: abs(bin), out: abs(out)}
	st.tell(ctx)
	return 0
}
