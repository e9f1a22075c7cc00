package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The metered plan of TestMoneySurvivesAnEmptyRedisWithTheOperator: tenant acme on the lab's
// provider at $1 a million tokens, a month's budget of $100 and a day of 1,000 requests.
const (
	meteredKey         = "sk-acme-dora-0123456789abcdef0123456789"
	meteredDayRequests = 1000
	meteredManifests   = `apiVersion: sluice.dev/v1alpha1
kind: ProviderQuota
metadata:
  name: lab
spec:
  baseURL: %s/v1
  models:
    - {name: gpt-4o-mini, encoding: o200k_base}
  limits: {requestsPerMinute: 100000, tokensPerMinute: 100000000, maxInFlight: 100}
  prices: {inputPerMillion: "1.00", outputPerMillion: "1.00"}
  retry: {maxAttempts: 1, baseDelay: 10ms, maxDelay: 10ms}
---
apiVersion: sluice.dev/v1alpha1
kind: TenantPlan
metadata:
  name: metered
spec:
  tenants: [acme]
  providers: [lab]
  perTenant:
    - {dimension: requests, amount: %d, per: day, onLimit: Reject}
  budget: {amount: "100", period: month}
---
apiVersion: v1
kind: Secret
metadata:
  name: acme-dora
  labels: {sluice.dev/tenant: acme, sluice.dev/user: dora}
stringData:
  apiKey: %s
`
)

// TestMoneySurvivesAnEmptyRedisWithTheOperator runs what a user runs: the manager, two gateways
// on one redis-server that keeps nothing on disk, each mounting the configuration's Secrets and
// the record's ConfigMaps as a Pod would, and the lab's provider. The tenant spends money and
// requests of its day; the manager records them at its polls. Then Redis is killed and started
// empty on the same address: the next calls, and kubectl describe tp, show the spend and the
// day's requests no lower than the record held, and no higher than all that was spent, never
// back at zero. Then the same with a Redis restored from a snapshot older than the record.
func TestMoneySurvivesAnEmptyRedisWithTheOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the manager, the gateway, Redis and the lab as processes; skipped with -short")
	}
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "create", "namespace", "sluice")
	redis := redisserver.Start(t)
	lab := startLabProvider(t)
	applyManifest(t, c, fmt.Sprintf(meteredManifests, lab, meteredDayRequests, meteredKey))

	gateways := [2]*gateway{}
	addrs := [2][2]string{{freeAddr(t), freeAddr(t)}, {freeAddr(t), freeAddr(t)}}
	startManager(t, c, "http://"+addrs[0][1]+"/admin/usage,http://"+addrs[1][1]+"/admin/usage", "--base-config", redisBaseConfig(t, redis.Addr))
	dir := t.TempDir()
	volume := cluster.Projection{Secrets: controllers.ConfigSecretNames("sluice-gateway-config"), OptionalConfigMaps: controllers.RecordConfigMapNames("sluice-gateway-config")}
	c.MountProjected(t, "sluice", volume, dir, "config.yaml")
	for i := range gateways {
		gateways[i] = startGatewayOn(t, filepath.Join(dir, "config.yaml"), addrs[i][0], addrs[i][1])
	}

	meteredSpend(t, gateways, 20)
	recorded := waitRecorded(t, c, dir, 20)
	waitLoaded(t, gateways, dir)
	before := meteredSpend(t, gateways, 5) // what a loss may take: the calls since the last poll at most
	t.Logf("before the loss: %d µ$ and %d requests used; the record held %d µ$ and %d requests", before.micros, before.requests, recorded.micros, recorded.requests)

	redis.Kill()
	redis.Restart() // nothing on disk: it comes back empty
	after := meteredAfterLoss(t, gateways)
	status := waitStatusAtLeast(t, c, after)
	t.Logf("after Redis came back empty: the calls found %d µ$ and %d requests used; kubectl shows %d µ$ and %d requests", after.micros, after.requests, status.micros, status.requests)
	checkMeteredBound(t, "the calls after Redis came back empty", after, recorded, before)
	checkMeteredBound(t, "kubectl describe tp after Redis came back empty", status, recorded, before)

	// A Redis restored from a snapshot older than the record.
	if err := redis.Client(t).Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	meteredSpend(t, gateways, 10)
	recorded = waitRecorded(t, c, dir, after.requests+10)
	waitLoaded(t, gateways, dir)
	before = meteredSpend(t, gateways, 1)
	redis.Kill()
	redis.Restart() // from the snapshot saved before the last 11 calls
	after = meteredAfterLoss(t, gateways)
	status = waitStatusAtLeast(t, c, after)
	t.Logf("after Redis came back from an older snapshot: the calls found %d µ$ and %d requests used; kubectl shows %d µ$ and %d requests; the record held %d µ$ and %d requests", after.micros, after.requests, status.micros, status.requests, recorded.micros, recorded.requests)
	checkMeteredBound(t, "the calls after Redis came back from an older snapshot", after, recorded, before)
	checkMeteredBound(t, "kubectl describe tp after Redis came back from an older snapshot", status, recorded, before)
	mustContain(t, c.Kubectl(t, "describe", "tp", "-n", "sluice", "metered"), "kubectl describe tp", `Record:`, `Name:\s+tenant:budget`, `Name:\s+tenant:requests:day`)
}

// meteredUse is what tenant acme used: micro-dollars of its budget, requests of its day.
type meteredUse struct{ micros, requests int64 }

// meteredCallMicros bounds what one call of meteredSpend costs: its prompt and at most 100
// tokens, at a micro-dollar a token.
const meteredCallMicros = 150

// checkMeteredBound checks what the tenant is found to have used after a loss, with the call
// each gateway sent after it: at least the record and one call, at most all that was used before
// and both calls.
func checkMeteredBound(t *testing.T, what string, got, recorded, before meteredUse) {
	t.Helper()
	if got.micros < recorded.micros || got.requests < recorded.requests+1 {
		t.Errorf("%s: %d µ$ and %d requests used; want at least the record's %d µ$ and %d requests, and a call", what, got.micros, got.requests, recorded.micros, recorded.requests)
	}
	if got.micros > before.micros+2*meteredCallMicros || got.requests > before.requests+2 {
		t.Errorf("%s: %d µ$ and %d requests used; want at most the %d µ$ and %d requests used before, and two calls", what, got.micros, got.requests, before.micros, before.requests)
	}
}

// meteredSpend sends n calls, alternating gateways, fails unless each is served, and returns what
// the tenant used after the last, as the gateways' store holds it.
func meteredSpend(t *testing.T, gateways [2]*gateway, n int64) meteredUse {
	t.Helper()
	var last answer
	for i := range n {
		if last = gateways[i%2].post(t, "/v1/chat/completions", meteredKey, chatBody); last.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, last.status, last.body)
		}
	}
	return meteredUse{micros: storeSpend(t, gateways[0]), requests: meteredDayRequests - last.int(t, "X-Ratelimit-Remaining-Requests")}
}

// meteredAfterLoss sends a call through each gateway at once, each sent again while the store is
// still coming back (503), and returns what the tenant used as the served calls left it.
func meteredAfterLoss(t *testing.T, gateways [2]*gateway) meteredUse {
	t.Helper()
	var remaining [2]int64
	var wg sync.WaitGroup
	for i, g := range gateways {
		wg.Go(func() {
			poll.Until(t, processWait, "a call served after the loss", func() bool {
				a := g.post(t, "/v1/chat/completions", meteredKey, chatBody)
				if a.status == http.StatusOK {
					remaining[i] = a.int(t, "X-Ratelimit-Remaining-Requests")
				}
				return a.status == http.StatusOK
			})
		})
	}
	wg.Wait()
	return meteredUse{micros: storeSpend(t, gateways[0]), requests: meteredDayRequests - min(remaining[0], remaining[1])}
}

// storeSpend is the tenant's spend as the gateway's store holds it.
func storeSpend(t *testing.T, g *gateway) int64 {
	t.Helper()
	return micros(g.usage(t).Tenants[0].SpendThisPeriod)
}

// waitRecorded waits until the record the gateways mount holds at least requests of the tenant's
// day, and returns what it holds.
func waitRecorded(t *testing.T, c *cluster.Cluster, dir string, requests int64) meteredUse {
	t.Helper()
	var got meteredUse
	poll.Until(t, processWait, fmt.Sprintf("the mounted record to hold %d requests", requests), func() bool {
		cfg, err := gatewayv1.Load(filepath.Join(dir, "config.yaml"))
		if err != nil {
			return false
		}
		got = meteredUse{}
		for _, s := range cfg.Record {
			for _, w := range s.Windows {
				if s.Scope == "tenant:acme" {
					got.micros += w.Used["tenant:budget"]
					got.requests += w.Used["tenant:requests:day"]
				}
			}
		}
		return got.requests >= requests
	})
	return got
}

// waitLoaded waits until each gateway has loaded its configuration since the record files in dir
// were last written: it holds the record that waitRecorded read.
func waitLoaded(t *testing.T, gateways [2]*gateway, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "record-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no record file in %s: %v", dir, err)
	}
	var written float64
	for _, f := range files {
		if info, err := os.Stat(f); err == nil {
			written = max(written, float64(info.ModTime().UnixNano())/1e9)
		}
	}
	for _, g := range gateways {
		poll.Until(t, processWait, "the gateway to load the record", func() bool {
			return metricValue(t, g, "sluice_config_last_reload_success_timestamp_seconds") >= written
		})
	}
}

// metricValue is the value of a sample of the gateway's /metrics without labels; 0 if absent.
func metricValue(t *testing.T, g *gateway, name string) float64 {
	t.Helper()
	for line := range strings.Lines(g.metrics(t)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			v, _ := strconv.ParseFloat(value, 64)
			return v
		}
	}
	return 0
}

// waitStatusAtLeast waits until the TenantPlan's status shows the tenant's spend and day as
// the calls after a loss found them, and returns it: what kubectl describe tp shows.
func waitStatusAtLeast(t *testing.T, c *cluster.Cluster, want meteredUse) meteredUse {
	t.Helper()
	var got meteredUse
	poll.Until(t, processWait, "the TenantPlan's status to show the spend after the loss", func() bool {
		out := c.Kubectl(t, "get", "tp", "-n", "sluice", "metered", "-o",
			`jsonpath={.status.tenants[0].spentThisPeriod} {.status.tenants[0].record.windows[?(@.name=="tenant:requests:day")].used}`)
		spent, requests, _ := strings.Cut(out, " ")
		n, err := strconv.ParseInt(requests, 10, 64)
		if err != nil {
			return false
		}
		got = meteredUse{micros: micros(gatewayv1.Money(spent)), requests: n}
		return got.micros >= want.micros && got.requests >= want.requests
	})
	return got
}

// micros reads dollars as micro-dollars; 0 for none.
func micros(m gatewayv1.Money) int64 {
	n, _ := m.MicroDollars()
	return n
}

// redisBaseConfig writes the manager's base configuration: the gateways' store, the Redis at addr,
// failing closed.
func redisBaseConfig(t *testing.T, addr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "base.yaml")
	cfg := fmt.Sprintf("apiVersion: gateway.sluice.dev/v1\nkind: GatewayConfig\nstore:\n  type: redis\n  redis: {address: %q, failMode: closed, replicas: 2}\n", addr)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startLabProvider runs the lab's provider, at $1 a million tokens and limits no test reaches,
// and returns its URL.
func startLabProvider(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-latency", "20ms", "-latency-stddev", "0",
		"-input-price", "1", "-output-price", "1", "-max-in-flight", "1000", "-requests-per-minute", "1000000", "-tokens-per-minute", "1000000000"))
	url := "http://" + addr
	poll.Until(t, processWait, "the lab provider to listen", func() bool {
		resp, err := http.Get(url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return url
}

// applyManifest applies YAML with kubectl in namespace sluice.
func applyManifest(t *testing.T, c *cluster.Cluster, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Kubectl(t, "apply", "--server-side", "-n", "sluice", "-f", path)
}
