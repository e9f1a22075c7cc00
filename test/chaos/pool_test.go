package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The pool of TestPooledProvidersFailOver: model gpt-4o-mini at two accounts, "big" with ten
// times the limits of "small". Calls take 200 ms, so big's in-flight cap lets it serve 150 calls
// a second and its requests a minute 100; small serves a tenth of each.
var (
	bigAccount   = account{name: "big", requestsPerMinute: 6000, tokensPerMinute: 600_000, maxInFlight: 30}
	smallAccount = account{name: "small", requestsPerMinute: 600, tokensPerMinute: 60_000, maxInFlight: 3}
)

// poolCrowd is how many clients call each gateway, each one call after another: more than the
// pool serves at once, so that both providers are full and calls queue.
const poolCrowd = 12

// account is a lab provider's account, as its process is run and the gateways are told.
type account struct {
	name                                            string
	requestsPerMinute, tokensPerMinute, maxInFlight int64
}

// TestPooledProvidersFailOver runs two gateways on one Redis in front of a pool of two lab
// providers, "big" and "small", with a crowd of clients that come back when told to. Calls spread
// over both within their limits: neither answers 429 or 503. Big is killed (SIGKILL) under load:
// no client sees an error but for streams big was in the middle of, which are counted; the calls
// big held and those waiting for it go to small. Big is started again on its address, and its
// breaker's probe brings it back into the pool.
func TestPooledProvidersFailOver(t *testing.T) {
	skipShort(t)
	redis := redisserver.Start(t)
	bigAddr := freeAddr(t)
	big := startAccount(t, bigAccount, bigAddr)
	small := startAccount(t, smallAccount, freeAddr(t))
	config := writePoolConfig(t, redis.Addr, map[string]string{"big": bigAddr, "small": small.url[len("http://"):]})
	gateways := []*gateway{startGateway(t, config), startGateway(t, config)}
	first := gateways[0].chat("Say hello.", false, loadTokens)
	estimate, cost := gateways[0].estimateOf(t, first)
	crowd := startCrowd(gateways)
	defer crowd.stop()

	crowd.waitServed(t, 150, "calls served by the pool")
	before := big.stats(t)
	if s := small.stats(t); before.Accepted == 0 || s.Accepted == 0 {
		t.Fatalf("big served %d calls and small %d; want both to serve", before.Accepted, s.Accepted)
	}
	big.proc.Kill()
	killed := crowd.served.Load()
	crowd.waitServed(t, killed+100, "calls served by small alone")
	big = startAccount(t, bigAccount, bigAddr)
	poll.Until(t, time.Minute, "big to rejoin the pool", func() bool { return big.stats(t).Accepted > 0 })
	answers := crowd.stop()

	counts := countAnswers(answers)
	s := small.stats(t)
	t.Logf("answers: %v; big served %d before its kill and %d after its restart, small %d; failovers %v",
		counts, before.Accepted, big.stats(t).Accepted, s.Accepted, failovers(t, gateways))
	for name, st := range map[string]labStatsAll{"big before its kill": before, "small": s} {
		if n := st.Rejected429Requests + st.Rejected429Tokens + st.Rejected503; n != 0 {
			t.Errorf("%s answered %d calls 429 or 503; want none: the gateways pace it within its limits", name, n)
		}
	}
	if n := counts["error"]; n != 0 {
		t.Errorf("%d calls that were not streams ended in an error; want none: a provider's failure before its answer begins is another provider's call", n)
	}
	if n := counts["broken stream"]; n > int(bigAccount.maxInFlight) {
		t.Errorf("%d streams broke; want at most the %d big could have been in the middle of", n, bigAccount.maxInFlight)
	}
	checkChargedOnce(t, gateways[0], int64(counts["served"]+1), int64(counts["broken stream"]), cost, estimate)
}

// checkChargedOnce checks the tenant's spend in the gateways' shared Redis: each call served
// charged once, at its cost (a token is a micro-dollar at both providers), however often a
// provider failed it before it was served, and each broken stream at most its estimate: what it
// generated, its prompt counted as the gateway counts it, which may be a few tokens more than the
// provider's count.
func checkChargedOnce(t *testing.T, g *gateway, served, broken, cost, estimate int64) {
	t.Helper()
	least, most := served*cost, served*cost+broken*estimate
	poll.Until(t, processWait, "every call to be settled", func() bool { return g.tenantSpend(t) >= least })
	spent := g.tenantSpend(t)
	t.Logf("the tenant spent %d µ$ for %d calls served at %d µ$ and %d broken streams, a call estimated at %d µ$", spent, served, cost, broken, estimate)
	if spent > most {
		t.Errorf("the tenant spent %d µ$; want at most %d: %d calls served at %d µ$ each, and %d broken streams at most their estimate, %d µ$", spent, most, served, cost, broken, estimate)
	}
}

// labStatsAll is a lab provider's /stats, refusals included.
type labStatsAll struct {
	Accepted, Rejected429Requests, Rejected429Tokens, Rejected503 int64
}

// accountProcess is a lab provider process serving one account.
type accountProcess struct {
	url  string
	proc *proc.Process
}

// startAccount runs a lab provider for a on addr, calls taking 200 ms, and waits until it listens.
func startAccount(t *testing.T, a account, addr string) *accountProcess {
	t.Helper()
	p := &accountProcess{url: "http://" + addr}
	p.proc = proc.Start(t, "lab-"+a.name, exec.Command(labBin, "provider", "-listen", addr, "-latency", "200ms", "-latency-stddev", "0",
		"-requests-per-minute", strconv.FormatInt(a.requestsPerMinute, 10), "-tokens-per-minute", strconv.FormatInt(a.tokensPerMinute, 10),
		"-max-in-flight", strconv.FormatInt(a.maxInFlight, 10)))
	poll.Until(t, processWait, "lab provider "+a.name+" to listen", func() bool {
		resp, err := http.Get(p.url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return p
}

func (p *accountProcess) stats(t *testing.T) labStatsAll {
	t.Helper()
	var s labStatsAll
	resp, err := http.Get(p.url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// writePoolConfig writes the configuration of two gateways on Redis at redisAddr whose model
// gpt-4o-mini is served by big and small at the addresses given. A provider is tried twice before
// its call goes to the other, and its breaker opens after three failures in a row, for 3 s.
func writePoolConfig(t *testing.T, redisAddr string, addrs map[string]string) string {
	t.Helper()
	var providers bytes.Buffer
	for _, a := range []account{bigAccount, smallAccount} {
		fmt.Fprintf(&providers, `  - name: %s
    baseURL: http://%s/v1
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    requestsPerMinute: %d
    tokensPerMinute: %d
    maxInFlight: %d
    admissionCount: Tokenizer
    prices: {inputPerMillion: "1.00", outputPerMillion: "1.00"}
    retry: {maxAttempts: 2, baseDelay: 50ms, maxDelay: 200ms}
    timeout: 10s
    breaker: {failures: 3, openFor: 3s}
`, a.name, addrs[a.name], a.requestsPerMinute, a.tokensPerMinute, a.maxInFlight)
	}
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store:
  type: redis
  redis: {address: %q, failMode: closed, replicas: 2}
providers:
%stenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [big, small]
    budget: {amount: "1000", period: month}
`, redisAddr, providers.String(), gatewayv1.HashKey(apiKey))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// crowd is poolCrowd clients per gateway, each sending one call after another until stopped: one
// call in four a stream. A client told busy comes back when its Retry-After says, with the same
// call; every other answer is its call's last.
type crowd struct {
	mu      sync.Mutex
	answers []answer
	served  atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func startCrowd(gateways []*gateway) *crowd {
	c := &crowd{done: make(chan struct{})}
	for _, g := range gateways {
		for i := range poolCrowd {
			c.wg.Go(func() { c.client(g, i%4 == 0) })
		}
	}
	return c
}

// client calls g until the crowd stops.
func (c *crowd) client(g *gateway, stream bool) {
	for {
		select {
		case <-c.done:
			return
		default:
		}
		a := g.chat("Say hello.", stream, loadTokens)
		if a.status == http.StatusTooManyRequests && a.errorCode() == "queue_busy" {
			select {
			case <-c.done:
				return
			case <-time.After(retryAfter(a)):
			}
			continue
		}
		if a.status == http.StatusOK && !isBrokenStream(a) {
			c.served.Add(1)
		}
		c.mu.Lock()
		c.answers = append(c.answers, a)
		c.mu.Unlock()
	}
}

// retryAfter is the wait an answer's Retry-After states, in whole seconds; a second if none.
func retryAfter(a answer) time.Duration {
	if n, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Second
}

// waitServed waits until n calls have been served.
func (c *crowd) waitServed(t *testing.T, n int64, what string) {
	t.Helper()
	poll.Until(t, time.Minute, fmt.Sprintf("%d %s", n, what), func() bool { return c.served.Load() >= n })
}

// stop stops the clients, waits for their last calls and returns every answer.
func (c *crowd) stop() []answer {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers
}

// isBrokenStream reports whether a is a stream that ended with the gateway's error event.
func isBrokenStream(a answer) bool {
	return bytes.Contains(a.body, []byte(`"provider_stream_broken"`)) || bytes.Contains(a.body, []byte(`"provider_timeout"`))
}

// countAnswers counts answers: served, broken streams, and errors (any other).
func countAnswers(answers []answer) map[string]int {
	out := map[string]int{}
	for _, a := range answers {
		switch {
		case a.status == http.StatusOK && isBrokenStream(a):
			out["broken stream"]++
		case a.status == http.StatusOK:
			out["served"]++
		default:
			out["error"]++
		}
	}
	return out
}

// failovers sums the gateways' calls sent to another provider of the pool, by the provider that
// failed them.
func failovers(t *testing.T, gateways []*gateway) map[string]float64 {
	out := map[string]float64{}
	for _, name := range []string{"big", "small"} {
		for _, g := range gateways {
			out[name] += g.metric(t, `sluice_gateway_failovers_total{provider="`+name+`"`)
		}
	}
	return out
}

// TestAzureProviderProcess calls a lab provider run as an Azure OpenAI resource through a gateway:
// the call reaches the deployment with the resource's api-version and its key in api-key, and is
// served; the same gateway with the wrong api-version gets the resource's refusal.
func TestAzureProviderProcess(t *testing.T) {
	skipShort(t)
	addr := freeAddr(t)
	proc.Start(t, "lab-azure", exec.Command(labBin, "provider", "-listen", addr, "-latency", "10ms", "-latency-stddev", "0",
		"-api-key", "azure-secret", "-azure-api-version", "2024-10-21", "-azure-deployments", "prod-mini=gpt-4o-mini"))
	poll.Until(t, processWait, "the Azure lab provider to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "azure.key"), []byte("azure-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		want    int
	}{{"2024-10-21", http.StatusOK}, {"2023-05-15", http.StatusBadRequest}} {
		cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: azure-east
    baseURL: http://%s
    apiKeyFile: azure.key
    azure: {apiVersion: %q, deployments: {gpt-4o-mini: prod-mini}}
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [azure-east]
`, addr, tc.version, gatewayv1.HashKey(apiKey))
		path := filepath.Join(dir, "sluice-"+tc.version+".yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, path)
		if a := g.chat("Say hello.", false, loadTokens); a.status != tc.want {
			t.Errorf("api-version %s: %d %s; want %d", tc.version, a.status, a.body, tc.want)
		}
		g.proc.Stop()
	}
}
