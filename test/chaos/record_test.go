package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The tenant's day of requests in the record test: a quota no call here reaches.
const dayRequests = 1000

// TestMoneySurvivesAnEmptyRedis runs two gateways on one redis-server that keeps nothing on
// disk, with the durable record kept as a file the gateways read (as without Kubernetes: a job
// saves what a gateway's /admin/record answers). The tenant spends money and requests of its
// day's quota; the record is taken; it spends more. Then Redis is killed and started empty on
// the same address: the next calls find the spend and the quota used no lower than the record
// held, and no higher than all that was spent; the two gateways re-seed the tenant's windows
// once; a job accepted before the loss is answered job_lost. Then the same with a Redis restored
// from a snapshot older than the record and the job.
func TestMoneySurvivesAnEmptyRedis(t *testing.T) {
	skipShort(t)
	redis := redisserver.Start(t)
	lab := startLab(t)
	config := writeConfig(t, settings{provider: lab.url, store: redisStore(redis.Addr, "closed"), maxInFlight: 100, recordFile: "record.json",
		limits: fmt.Sprintf("    perTenant:\n      - {dimension: requests, amount: %d, per: day}\n    budget: {amount: \"100\", period: month}", dayRequests)})
	rec := &recordKeeper{path: filepath.Join(filepath.Dir(config), "record.json")}
	a, b := startGateway(t, config), startGateway(t, config)
	gateways := []*gateway{a, b}

	spend(t, gateways, 20)
	rec.take(t, a, gateways)
	recorded := rec.used(t)
	job := a.addJob(t, "a job accepted before the loss")
	before := spend(t, gateways, 5) // after the record: what a loss may take
	t.Logf("before the loss: %d µ$ and %d requests used; the record holds %d µ$ and %d requests", before.micros, before.requests, recorded.micros, recorded.requests)

	redis.Kill()
	redis.Restart() // nothing on disk: it comes back empty
	after := afterLoss(t, gateways)
	checkJobLost(t, b, job)
	t.Logf("after Redis came back empty: %d µ$ and %d requests used, with the call that found it", after.micros, after.requests)
	checkWithinBound(t, after, recorded, before)
	if n := a.metric(t, "sluice_gateway_store_reseeds_total") + b.metric(t, "sluice_gateway_store_reseeds_total"); n != 1 {
		t.Errorf("the two gateways re-seeded the tenant's windows %v times; want once", n)
	}

	// A Redis restored from a snapshot older than the record.
	rec.take(t, a, gateways)
	if err := redis.Client(t).Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	job = a.addJob(t, "a job accepted before the loss")
	before = spend(t, gateways, 10)
	rec.take(t, a, gateways)
	recorded = rec.used(t)
	redis.Kill()
	redis.Restart() // from the snapshot saved before the last 10 calls and the job
	restored := afterLoss(t, gateways)
	checkJobLost(t, b, job)
	t.Logf("after Redis came back from an older snapshot: %d µ$ and %d requests used; the record held %d µ$ and %d requests", restored.micros, restored.requests, recorded.micros, recorded.requests)
	checkWithinBound(t, restored, recorded, before)
	if n := a.metric(t, "sluice_gateway_store_reseeds_total") + b.metric(t, "sluice_gateway_store_reseeds_total"); n != 2 {
		t.Errorf("the gateways re-seeded %v times in all; want twice, once a loss", n)
	}
}

// checkJobLost checks that a job accepted before the loss is answered 410 job_lost.
func checkJobLost(t *testing.T, g *gateway, id string) {
	t.Helper()
	if a := g.do(http.MethodGet, "/v1/jobs/"+id, ""); a.status != http.StatusGone || a.errorCode() != "job_lost" {
		t.Errorf("GET a job accepted before the loss: %d %s; want 410 job_lost", a.status, a.body)
	}
}

// usedCounts are what the tenant used: micro-dollars of its budget, requests of its day.
type usedCounts struct{ micros, requests int64 }

// checkWithinBound checks what a store put back holds, with the calls that found it (one per
// gateway): at least the record and one call, at most all that was used before and those calls
// (and a job's call, which its worker may have settled after the last read).
func checkWithinBound(t *testing.T, got, recorded, before usedCounts) {
	t.Helper()
	if got.micros < recorded.micros || got.requests < recorded.requests+1 {
		t.Errorf("after the loss the tenant used %d µ$ and %d requests; want at least the record's %d µ$ and %d requests (and the call that found it)", got.micros, got.requests, recorded.micros, recorded.requests)
	}
	if got.micros > before.micros+3*maxCallMicros || got.requests > before.requests+2 {
		t.Errorf("after the loss the tenant used %d µ$ and %d requests; want at most the %d µ$ and %d requests used before (and two calls)", got.micros, got.requests, before.micros, before.requests)
	}
}

// maxCallMicros is the most a call of spend costs: its prompt and 20 tokens, at a micro-dollar a
// token.
const maxCallMicros = 100

// spend sends n calls, alternating gateways, fails unless each is served, and returns what the
// tenant used after the last.
func spend(t *testing.T, gateways []*gateway, n int) usedCounts {
	t.Helper()
	var last answer
	for i := range n {
		if last = gateways[i%len(gateways)].chat("count me", false, 20); last.status != http.StatusOK {
			t.Fatalf("call %d: %d %s %v", i, last.status, last.body, last.err)
		}
	}
	return usedCounts{micros: gateways[0].tenantSpend(t), requests: requestsUsed(t, last)}
}

// requestsUsed is what an answer's rate-limit headers say the tenant used of its day.
func requestsUsed(t *testing.T, a answer) int64 {
	t.Helper()
	remaining, err := strconv.ParseInt(a.header.Get("X-Ratelimit-Remaining-Requests"), 10, 64)
	if err != nil {
		t.Fatalf("remaining requests: %v", err)
	}
	return dayRequests - remaining
}

// afterLoss sends one call through each gateway at once, each sent again while the store is
// still coming back (503), and returns what the tenant used as the first served call left it.
func afterLoss(t *testing.T, gateways []*gateway) usedCounts {
	t.Helper()
	answers := make([]answer, len(gateways))
	var wg sync.WaitGroup
	for i, g := range gateways {
		wg.Go(func() {
			poll.Until(t, processWait, "a call served after the loss", func() bool {
				answers[i] = g.chat("count me", false, 20)
				return answers[i].status == http.StatusOK
			})
		})
	}
	wg.Wait()
	return usedCounts{micros: gateways[0].tenantSpend(t), requests: max(requestsUsed(t, answers[0]), requestsUsed(t, answers[1]))}
}

// recordKeeper keeps the durable record in a file, as the operator keeps it in ConfigMaps: it
// asks one gateway for the store's windows, merges them with the record, and writes it where the
// gateways read it.
type recordKeeper struct {
	path string
	rec  gatewayv1.Record
}

// take takes the record from g and waits until every gateway has loaded it.
func (k *recordKeeper) take(t *testing.T, g *gateway, gateways []*gateway) {
	t.Helper()
	versions := map[string]int64{}
	for _, s := range k.rec.Scopes {
		versions[s.Scope] = s.Version
	}
	snap := g.record(t, versions)
	merged := gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind}
	for _, s := range snap.Scopes {
		merged.Scopes = append(merged.Scopes, k.scope(s.Scope).Merge(s))
	}
	reloads := make([]float64, len(gateways))
	for i, gw := range gateways {
		reloads[i] = gw.metric(t, `sluice_config_reloads_total{result="success"`)
	}
	data, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	tmp := k.path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, k.path); err != nil {
		t.Fatal(err)
	}
	k.rec = merged
	for i, gw := range gateways {
		poll.Until(t, processWait, "the gateway to load the record", func() bool {
			return gw.metric(t, `sluice_config_reloads_total{result="success"`) > reloads[i]
		})
	}
}

// scope is the record's entry for a scope, or an empty one at version 0.
func (k *recordKeeper) scope(name string) gatewayv1.ScopeRecord {
	for _, s := range k.rec.Scopes {
		if s.Scope == name {
			return s
		}
	}
	return gatewayv1.ScopeRecord{Scope: name}
}

// used is what the record holds of the tenant's budget and day of requests.
func (k *recordKeeper) used(t *testing.T) usedCounts {
	t.Helper()
	var out usedCounts
	for _, w := range k.scope("tenant:acme").Windows {
		out.micros += w.Used["tenant:budget"]
		out.requests += w.Used["tenant:requests:day"]
	}
	if out.micros == 0 || out.requests == 0 {
		t.Fatalf("the record holds %+v of the tenant; want its budget and day of requests used", k.scope("tenant:acme"))
	}
	return out
}

// record posts a record request to the gateway's admin port and returns its answer.
func (g *gateway) record(t *testing.T, versions map[string]int64) gatewayv1.Record {
	t.Helper()
	body, err := json.Marshal(gatewayv1.RecordRequest{Versions: versions})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(g.admin+gatewayv1.RecordPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatal(errors.New(resp.Status + ": " + string(msg)))
	}
	var rec gatewayv1.Record
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
