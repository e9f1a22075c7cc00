package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// sentinelStore is the YAML of a store that finds its primary through group's sentinels, for
// replicas gateways.
func sentinelStore(group *redisserver.SentinelGroup, failMode string, replicas int) string {
	return fmt.Sprintf("store:\n  type: redis\n  redis:\n    sentinel: {masterName: %s, addresses: [%s]}\n    failMode: %s\n    replicas: %d",
		redisserver.MasterName, strings.Join(group.Sentinels, ", "), failMode, replicas)
}

// TestSentinelFailoverUnderLoad kills the primary of a Sentinel group (SIGKILL) while two
// gateways, failing closed, take calls. The sentinels promote the replica and both gateways
// follow: calls the failover catches are answered 503 with Retry-After, then calls are served
// again. No call answered 200 is lost or charged twice: the provider served each once, each
// gateway settled its own at the provider's usage, and the new primary holds every served
// call's cost, beyond it only the estimates of calls the failover caught.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	skipShort(t)
	group := redisserver.StartSentinel(t)
	lab := startLab(t)
	config := writeConfig(t, settings{provider: lab.url, store: sentinelStore(group, "closed", 2), maxInFlight: 1000})
	gateways := []*gateway{startGateway(t, config), startGateway(t, config)}
	first := gateways[0].chat("Say hello.", false, loadTokens)
	estimate, _ := gateways[0].estimateOf(t, first)

	loads := []*load{startLoad(gateways[0], first), startLoad(gateways[1])}
	for _, l := range loads {
		l.waitFor(t, 20, "calls served through the first primary")
	}
	group.Primary.Kill()
	poll.Until(t, processWait, "the sentinels to promote the replica", func() bool {
		addr, err := group.PrimaryAddr(context.Background())
		return err == nil && addr == group.Replica.Addr
	})
	for _, l := range loads {
		l.waitFor(t, l.count(http.StatusOK)+20, "calls served through the new primary")
	}
	var answers []answer
	for i, l := range loads {
		mine := l.stop()
		answers = append(answers, mine...)
		t.Logf("gateway %d: %d answers, %d served, %d refused 503", i, len(mine), l.count(http.StatusOK), l.count(http.StatusServiceUnavailable))
	}
	poll.Until(t, processWait, "every call to end", func() bool {
		return gateways[0].inFlight(t) == 0 && gateways[1].inFlight(t) == 0 && lab.stats(t).InFlight == 0
	})

	served := checkServedOnceByAll(t, gateways, lab, answers)
	checkOnlyUnavailable(t, answers)
	var caught int64
	for _, g := range gateways {
		caught += int64(g.metric(t, `sluice_gateway_store_errors_total{action="settle"`) + g.metric(t, `sluice_gateway_store_errors_total{action="refused"`))
	}
	spent := gateways[0].tenantSpend(t)
	t.Logf("%d answers, %d served for %d µ$; the new primary holds %d µ$; calls caught: %d", len(answers), countStatus(answers, http.StatusOK), served, spent, caught)
	if spent < served || spent > served+caught*estimate {
		t.Errorf("the new primary holds %d µ$ of spend; want the %d served, plus at most the %d µ$ estimate of each of the %d calls the failover caught",
			spent, served, estimate, caught)
	}
}

// checkServedOnceByAll checks that the provider served every call answered 200 by any of the
// gateways and no other, and that together they settled them at the provider's bill; it
// returns what they cost.
func checkServedOnceByAll(t *testing.T, gateways []*gateway, lab *labProvider, answers []answer) int64 {
	t.Helper()
	var usage, settled int64
	for _, a := range answers {
		if a.err != nil {
			t.Errorf("a call got no answer: %v", a.err)
		}
		if a.status == http.StatusOK {
			usage += a.usage()
		}
	}
	for _, g := range gateways {
		settled += g.providerSpend(t)
	}
	s := lab.stats(t)
	if served := s.Accepted - s.Canceled; served != int64(countStatus(answers, http.StatusOK)) || s.MicroDollars != usage {
		t.Errorf("the provider served %d calls for %d µ$; want the %d answered 200, for the %d µ$ of their usage", served, s.MicroDollars, countStatus(answers, http.StatusOK), usage)
	}
	if settled != s.MicroDollars {
		t.Errorf("the gateways settled their calls at %d µ$; want the provider's bill, %d µ$", settled, s.MicroDollars)
	}
	return s.MicroDollars
}

func countStatus(answers []answer, status int) int {
	n := 0
	for _, a := range answers {
		if a.status == status {
			n++
		}
	}
	return n
}

// TestBudgetSurvivesAppendOnlyKill kills (SIGKILL) a Redis that runs with append-only
// persistence, fsynced every second, while calls spend a tenant's budget, and starts it again
// from its directory. The budget comes back where it was, short of at most the writes of the
// last two seconds before the kill (appendfsync everysec loses one second of writes, two when an
// fsync is slow), and never more than the calls served took.
func TestBudgetSurvivesAppendOnlyKill(t *testing.T) {
	skipShort(t)
	redis := redisserver.Start(t, redisserver.AppendOnly())
	lab := startLab(t)
	g := startGateway(t, writeConfig(t, settings{provider: lab.url, store: redisStore(redis.Addr, "closed"), maxInFlight: 1000}))
	first := g.chat("Say hello.", false, loadTokens)
	estimate, _ := g.estimateOf(t, first)
	if got := g.metric(t, "sluice_gateway_store_persistent"); got != 1 {
		t.Errorf("sluice_gateway_store_persistent with appendonly yes = %v; want 1", got)
	}

	load := startLoad(g, first)
	load.waitFor(t, 100, "calls served before the kill")
	samples := sampleSpend(t, g, 3*time.Second)
	redis.Kill()
	killed := time.Now()
	answers := load.stop()
	redis.Restart()
	poll.Until(t, processWait, "the gateway to read Redis again", func() bool { return g.ready() == http.StatusOK })
	restored := g.tenantSpend(t)
	served := lab.stats(t).MicroDollars

	last := samples[len(samples)-1]
	allowed := last.spent - spentBy(samples, killed.Add(-2*time.Second))
	t.Logf("%d answers; spend %d µ$ when last read before the kill, %d µ$ after the restart (lost %d µ$; the last 2 s before the kill wrote %d µ$); the provider served %d µ$",
		len(answers), last.spent, restored, last.spent-restored, allowed, served)
	if restored < last.spent-allowed {
		t.Errorf("the budget came back at %d µ$ spent; want at least %d: %d µ$ when last read, less the %d µ$ written in the last two seconds",
			restored, last.spent-allowed, last.spent, allowed)
	}
	caught := int64(countStatus(answers, http.StatusServiceUnavailable)) + int64(g.metric(t, `sluice_gateway_store_errors_total{action="settle"`))
	if restored > served+caught*estimate {
		t.Errorf("the budget came back at %d µ$ spent; want at most the %d µ$ served, plus the %d µ$ estimate of each of the %d calls the kill caught",
			restored, served, estimate, caught)
	}
}

// spendSample is the tenant's spend as Redis held it at a time.
type spendSample struct {
	at    time.Time
	spent int64
}

// sampleSpend reads the tenant's spend through the gateway, one read after another, for span.
func sampleSpend(t *testing.T, g *gateway, span time.Duration) []spendSample {
	t.Helper()
	var samples []spendSample
	for end := time.Now().Add(span); time.Now().Before(end); {
		samples = append(samples, spendSample{at: time.Now(), spent: g.tenantSpend(t)})
	}
	return samples
}

// spentBy is the spend of the last sample read before at (the first sample if none was).
func spentBy(samples []spendSample, at time.Time) int64 {
	spent := samples[0].spent
	for _, s := range samples {
		if s.at.Before(at) {
			spent = s.spent
		}
	}
	return spent
}

// TestFailOpenNeverRefillsABudget spends a tenant's small monthly budget through a gateway that
// fails open, kills Redis (SIGKILL, append-only persistence) once the budget refuses calls, and
// goes on calling through the outage and after Redis returns. No call is served while Redis is
// down (the budget is not started again from a local share of its whole), and none after it
// returns: the provider served no more than the budget, plus the estimate of each call in
// flight when it ran out.
func TestFailOpenNeverRefillsABudget(t *testing.T) {
	skipShort(t)
	const budget = 10_000 // µ$: $0.01, a few hundred calls
	redis := redisserver.Start(t, redisserver.Durable())
	lab := startLab(t)
	g := startGateway(t, writeConfig(t, settings{provider: lab.url, store: redisStore(redis.Addr, "open"), maxInFlight: 1000,
		limits: `    budget: {amount: "0.01", period: month}`}))
	first := g.chat("Say hello.", false, loadTokens)
	estimate, _ := g.estimateOf(t, first)

	load := startLoad(g, first)
	poll.Until(t, processWait, "the budget to refuse calls", func() bool { return load.count(http.StatusTooManyRequests) > 0 })
	servedBefore := load.count(http.StatusOK)
	redis.Kill()
	poll.Until(t, processWait, "a call refused 503 while Redis is down", func() bool { return load.count(http.StatusServiceUnavailable) > 0 })
	servedDuring := load.count(http.StatusOK) - servedBefore
	redis.Restart()
	poll.Until(t, processWait, "the gateway to decide in Redis again", func() bool { return g.metric(t, "sluice_gateway_store_up") == 1 })
	refusedAfter := load.count(http.StatusTooManyRequests)
	poll.Until(t, processWait, "the budget to refuse calls after the restart", func() bool { return load.count(http.StatusTooManyRequests) > refusedAfter })
	answers := load.stop()

	served := lab.stats(t).MicroDollars
	t.Logf("%d answers: %d served before the kill, %d in the outage, %d in all for %d µ$ of a %d µ$ budget; Redis holds %d µ$",
		len(answers), servedBefore, servedDuring, countStatus(answers, http.StatusOK), served, budget, g.tenantSpend(t))
	if got := g.metric(t, `sluice_gateway_store_errors_total{action="local"`); got != 0 {
		t.Errorf("%v calls decided locally while Redis was down; want none: the budget covers every call", got)
	}
	if slack := int64(loadWorkers) * estimate; served > budget+slack {
		t.Errorf("the provider served %d µ$ on a budget of %d µ$; want at most the budget and the %d µ$ estimate of each of %d calls in flight",
			served, budget, estimate, loadWorkers)
	}
}

// TestFailOpenSharesFollowReplicas runs two gateways failing open with store.redis.replicas: 1
// and a tenant limited only by a rate (40 requests an hour). Each counts both by their
// heartbeats; with Redis killed, each then passes 20 calls locally, half the limit, not the
// whole that replicas: 1 would give. A gateway that dies without leaving drops out of the count
// once its heartbeat expires.
func TestFailOpenSharesFollowReplicas(t *testing.T) {
	skipShort(t)
	const perHour = 40
	redis := redisserver.Start(t)
	lab := startLab(t)
	config := writeConfig(t, settings{provider: lab.url, store: redisStore(redis.Addr, "open"), maxInFlight: 1000,
		limits: fmt.Sprintf("    perTenant:\n      - {dimension: requests, amount: %d, per: hour}", perHour)})
	a, b := startGateway(t, config), startGateway(t, config)
	for _, g := range []*gateway{a, b} {
		poll.Until(t, processWait, "each gateway to count two", func() bool { return g.metric(t, "sluice_gateway_replicas") == 2 })
	}

	redis.Kill()
	for name, g := range map[string]*gateway{"a": a, "b": b} {
		served := callsServed(g, perHour)
		t.Logf("gateway %s served %d of %d calls with Redis down", name, served, perHour)
		if served < perHour/2 || served > perHour/2+1 { // +1: a call the local share earned back meanwhile
			t.Errorf("gateway %s served %d calls locally; want %d, half the limit for the two gateways counted", name, served, perHour/2)
		}
	}

	redis.Restart()
	b.proc.Kill()
	poll.Until(t, processWait, "gateway a to count one once b's heartbeat expired", func() bool { return a.metric(t, "sluice_gateway_replicas") == 1 })
}

// callsServed sends n calls to g, a few at a time, and returns how many were answered 200.
func callsServed(g *gateway, n int) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	served := 0
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	for range loadWorkers {
		wg.Go(func() {
			for range work {
				if g.chat("Say hello.", false, loadTokens).status == http.StatusOK {
					mu.Lock()
					served++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return served
}
