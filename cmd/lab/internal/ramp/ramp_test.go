package ramp

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labtest"
)

// gatewayBin is the gateway built once for the package's tests; empty
// with -short.
var gatewayBin string

func TestMain(m *testing.M) { os.Exit(labtest.Main(m, &gatewayBin)) }

// smallRamp is the reference ramp scaled down to a few seconds: calls of
// 50 ms, 6 users in steps of 300 ms, books of 10 pages of 80 tokens. The
// provider takes 14 calls at once, so two users adding their books at once
// (20 pages) break it, while the gateway's buckets of 5 let only 10 through.
// Its minute has room for every page of every case.
func smallRamp() Options {
	opts := DefaultOptions()
	opts.Provider.Latency, opts.Provider.LatencyStdDev = 50*time.Millisecond, 0
	opts.Provider.RequestsPerMinute, opts.Provider.TokensPerMinute, opts.Provider.MaxInFlight = 600, 20_000, 14
	opts.Users, opts.Step = []int{1, 2, 4, 6}, 300*time.Millisecond
	opts.Pages, opts.PromptTokens, opts.MaxTokens = 10, 60, 20
	opts.Duration, opts.QueueCap = time.Minute, time.Minute // bounds, not expectations: the queue case ends in about 15 s
	opts.Cases = []string{CaseSequential, CaseBurst}
	if !testing.Short() {
		// The door at 3 s: the queue's 60 pages take about 15 s at the provider's 20,000 tokens a
		// minute, so it turns pages away, and they come back when they were told to. The gateway
		// cases run two gateways sharing a redis-server, as behind a Service.
		opts.MaxWait, opts.Gateways = 3*time.Second, 2
		opts.Cases = append(opts.Cases, CaseReject, CaseQueue)
		opts.Gateway = gatewayBin
	}
	return opts
}

func TestRamp(t *testing.T) {
	var progress bytes.Buffer
	rep, err := Run(t.Context(), smallRamp(), &progress)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, &progress)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Logf("progress:\n%s\n%s", &progress, &table)
	cases := map[string]CaseReport{}
	for _, c := range rep.Cases {
		cases[c.Case] = c
		checkAccounting(t, c)
	}

	seq := cases[CaseSequential]
	if seq.DiedAtProvider != 0 || seq.Refused != 0 || seq.CleanBooks != seq.Books || seq.FirstFailure != nil || providerErrors(seq) != 0 {
		t.Errorf("sequential: %d died at the provider, %d refused, %d of %d books clean, first failure %v, provider errors %d; want no failure at all",
			seq.DiedAtProvider, seq.Refused, seq.CleanBooks, seq.Books, seq.FirstFailure, providerErrors(seq))
	}

	burst := cases[CaseBurst]
	if burst.DiedAtProvider == 0 || providerErrors(burst) == 0 || burst.CleanBooks == burst.Books || burst.FirstFailure == nil {
		t.Errorf("burst: %d died at the provider (provider errors %d), %d of %d books clean, first failure %v; want pages dead at the provider and broken books",
			burst.DiedAtProvider, providerErrors(burst), burst.CleanBooks, burst.Books, burst.FirstFailure)
	}

	if testing.Short() {
		t.Log("the reject case runs the gateway binary: skipped with -short")
		return
	}
	reject := cases[CaseReject]
	if reject.DiedAtProvider != 0 || providerErrors(reject) != 0 || reject.Outcomes[Refused] == 0 || reject.CleanBooks == reject.Books {
		t.Errorf("reject: %d died at the provider (provider errors %d), %d refused by the gateway, %d of %d books clean; want a clean provider and books broken by our own 429s",
			reject.DiedAtProvider, providerErrors(reject), reject.Outcomes[Refused], reject.CleanBooks, reject.Books)
	}
	if f := reject.FirstFailure; f == nil || f.Cause != Refused {
		t.Errorf("reject: first failure %v; want our own 429", f)
	}

	queue := cases[CaseQueue]
	if queue.DiedAtProvider != 0 || providerErrors(queue) != 0 || queue.CleanBooks != queue.Books || queue.BusyAnswers == 0 {
		t.Errorf("queue: %d died at the provider (provider errors %d), %d of %d books clean, %d busy answers; want a clean provider, every book whole, and the door saying busy",
			queue.DiedAtProvider, providerErrors(queue), queue.CleanBooks, queue.Books, queue.BusyAnswers)
	}
}

// checkAccounting checks that every page of every book is accounted for
// once, and that the client's count of pages served is the provider's.
func checkAccounting(t *testing.T, c CaseReport) {
	t.Helper()
	sum := 0
	for _, n := range c.Outcomes {
		sum += n
	}
	if want := c.Books * 10; c.Pages != want || sum != want {
		t.Errorf("%s: %d pages, outcomes add up to %d; want %d, the pages of %d books", c.Case, c.Pages, sum, want, c.Books)
	}
	if c.Books != 6 {
		t.Errorf("%s: %d books; want one for each of the 6 users", c.Case, c.Books)
	}
	if got, want := int64(c.Outcomes[Served]), c.Provider.Accepted-c.Provider.Canceled; got != want {
		t.Errorf("%s: %d pages served; the provider served %d", c.Case, got, want)
	}
}

// providerErrors is what the provider itself refused.
func providerErrors(c CaseReport) int64 {
	return c.Provider.Rejected429Requests + c.Provider.Rejected429Tokens + c.Provider.Rejected503
}

func TestRunRefusesAMissingGateway(t *testing.T) {
	opts := DefaultOptions()
	opts.Cases, opts.Gateway = []string{CaseSequential, CaseReject}, "/nonexistent/gateway"
	_, err := Run(t.Context(), opts, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the reject case needs the gateway") {
		t.Errorf("Run without the gateway = %v; want it refused before any case runs", err)
	}
}
