package chaos

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The load: loadWorkers clients, each sending one call after another, at most loadCalls each.
// Every call asks for loadTokens tokens, which the lab provider always gives, so that every call
// costs the same.
const (
	loadWorkers = 4
	loadCalls   = 500
	loadTokens  = 20
)

// TestRedisKilledUnderLoad kills Redis (SIGKILL) while calls flow, with each fail mode, and
// starts it again with what it had acknowledged. The tenant has a month's budget and a day's
// quota, which no gateway decides without Redis, whatever its fail mode: a call the outage
// catches is answered 503 with Retry-After, and sluice_gateway_store_up says the store is down,
// then up. /readyz says so too when failing closed, and stays 200 when failing open (rates still
// pass locally). In both modes no call answered 200 is lost or charged twice: the provider
// served each of them once, and the gateway settled each once at the provider's usage. Redis
// holds every served call's cost; beyond it, only the estimate of a call whose settlement could
// not reach Redis, or whose decision Redis took but could not answer (both counted in
// sluice_gateway_store_errors_total).
func TestRedisKilledUnderLoad(t *testing.T) {
	skipShort(t)
	for _, failMode := range []string{"closed", "open"} {
		t.Run(failMode, func(t *testing.T) {
			redis := redisserver.Start(t, redisserver.Durable())
			lab := startLab(t)
			g := startGateway(t, writeConfig(t, settings{provider: lab.url, store: redisStore(redis.Addr, failMode), maxInFlight: 1000}))
			first := g.chat("Say hello.", false, loadTokens)
			estimate, _ := g.estimateOf(t, first)

			load := startLoad(g, first)
			load.waitFor(t, 20, "calls served before the kill")
			redis.Kill()
			poll.Until(t, processWait, "a call refused 503 while Redis is down", func() bool { return load.count(http.StatusServiceUnavailable) > 0 })
			wantReady := map[string]int{"closed": http.StatusServiceUnavailable, "open": http.StatusOK}[failMode]
			if got := g.ready(); got != wantReady {
				t.Errorf("/readyz with Redis down, failing %s = %d; want %d", failMode, got, wantReady)
			}
			if got := g.metric(t, "sluice_gateway_store_up"); got != 0 {
				t.Errorf("sluice_gateway_store_up with Redis down = %v; want 0", got)
			}

			redis.Restart()
			poll.Until(t, processWait, "the gateway to decide in Redis again", func() bool {
				return g.metric(t, "sluice_gateway_store_up") == 1 && g.ready() == http.StatusOK
			})
			load.waitFor(t, load.count(http.StatusOK)+20, "calls served after the restart")
			answers := load.stop()
			poll.Until(t, processWait, "every call to end", func() bool { return g.inFlight(t) == 0 && lab.stats(t).InFlight == 0 })

			served := checkEveryCallServedOnce(t, g, lab, answers)
			checkOnlyUnavailable(t, answers)
			if local := g.metric(t, `sluice_gateway_store_errors_total{action="local"`); local != 0 {
				t.Errorf("%v calls decided locally; want none: a budget and a quota cover every call", local)
			}
			settleErrors := int64(g.metric(t, `sluice_gateway_store_errors_total{action="settle"`))
			spent := g.tenantSpend(t)
			t.Logf("%d answers, %d served for %d µ$; Redis holds %d µ$; settlements lost: %d", len(answers), load.count(http.StatusOK), served, spent, settleErrors)
			caught := settleErrors + int64(g.metric(t, `sluice_gateway_store_errors_total{action="refused"`))
			if spent < served || spent > served+caught*estimate {
				t.Errorf("Redis holds %d µ$ of spend; want the %d served, plus at most the %d µ$ estimate of each of the %d calls the outage caught",
					spent, served, estimate, caught)
			}
		})
	}
}

// checkOnlyUnavailable checks that every answer is 200, or 503 limiter_unavailable with
// Retry-After.
func checkOnlyUnavailable(t *testing.T, answers []answer) {
	t.Helper()
	for _, a := range answers {
		if a.status != http.StatusOK && (a.status != http.StatusServiceUnavailable || a.errorCode() != "limiter_unavailable" || a.header.Get("Retry-After") == "") {
			t.Fatalf("an answer with Redis down: %d %s (Retry-After %q); want 200, or 503 limiter_unavailable with Retry-After",
				a.status, a.body, a.header.Get("Retry-After"))
		}
	}
}

// estimateOf returns what the gateway estimated its first call at and what it cost, in
// micro-dollars. It fails the test unless the estimate covers the cost: a Redis that cannot be
// told a call's cost holds its estimate, and the tests count on that being no less.
func (g *gateway) estimateOf(t *testing.T, first answer) (estimate, cost int64) {
	t.Helper()
	if first.status != http.StatusOK {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	estimate, cost = int64(g.metric(t, `sluice_gateway_tokens_total{kind="estimated"`)), first.usage()
	if estimate < cost {
		t.Fatalf("the gateway estimated its first call at %d tokens, below its %d", estimate, cost)
	}
	return estimate, cost
}

// checkEveryCallServedOnce checks that the provider served every call answered 200 and no other,
// and that the gateway settled each at the provider's usage, once; it returns what they cost.
func checkEveryCallServedOnce(t *testing.T, g *gateway, lab *labProvider, answers []answer) int64 {
	t.Helper()
	var ok, usage int64
	for _, a := range answers {
		if a.err != nil {
			t.Errorf("a call got no answer: %v", a.err)
		}
		if a.status == http.StatusOK {
			ok++
			usage += a.usage()
		}
	}
	s := lab.stats(t)
	if served := s.Accepted - s.Canceled; served != ok || s.MicroDollars != usage {
		t.Errorf("the provider served %d calls for %d µ$; want the %d answered 200, for the %d µ$ of their usage", served, s.MicroDollars, ok, usage)
	}
	if got := g.providerSpend(t); got != s.MicroDollars {
		t.Errorf("the gateway settled its calls at %d µ$; want the provider's bill, %d µ$", got, s.MicroDollars)
	}
	return s.MicroDollars
}

// load is loadWorkers clients calling a gateway until stopped.
type load struct {
	mu      sync.Mutex
	answers []answer
	done    chan struct{}
	wg      sync.WaitGroup
}

// startLoad starts the clients; their answers follow those given.
func startLoad(g *gateway, answers ...answer) *load {
	l := &load{done: make(chan struct{}), answers: answers}
	for range loadWorkers {
		l.wg.Go(func() {
			for range loadCalls {
				select {
				case <-l.done:
					return
				default:
				}
				a := g.chat("Say hello.", false, loadTokens)
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// count is how many answers so far had status.
func (l *load) count(status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers {
		if a.status == status {
			n++
		}
	}
	return n
}

// waitFor waits until n calls have been answered 200.
func (l *load) waitFor(t *testing.T, n int, what string) {
	t.Helper()
	poll.Until(t, processWait, strconv.Itoa(n)+" "+what, func() bool { return l.count(http.StatusOK) >= n })
}

// stop stops the clients, waits for their last calls and returns every answer.
func (l *load) stop() []answer {
	close(l.done)
	l.wg.Wait()
	return l.answers
}

// labProvider is the lab's simulated provider, run as a process.
type labProvider struct {
	url  string
	proc *proc.Process
}

// startLab runs the lab provider: calls take 50 ms, at $1 a million tokens, with limits no test
// reaches.
func startLab(t *testing.T) *labProvider {
	t.Helper()
	addr := freeAddr(t)
	p := &labProvider{url: "http://" + addr}
	p.proc = proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-latency", "50ms", "-latency-stddev", "0",
		"-input-price", "1", "-output-price", "1", "-max-in-flight", "1000", "-requests-per-minute", "1000000", "-tokens-per-minute", "1000000000"))
	poll.Until(t, processWait, "the lab provider to listen", func() bool {
		resp, err := http.Get(p.url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return p
}

// labStats are the lab provider's counts (its /stats).
type labStats struct {
	Accepted, Canceled, InFlight int64
	MicroDollars                 int64
}

func (p *labProvider) stats(t *testing.T) labStats {
	t.Helper()
	resp, err := http.Get(p.url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s labStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
