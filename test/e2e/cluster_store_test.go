package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/redisserver"
)

// TestGatewaysOnRedisCluster runs two gateways on a three-primary Redis Cluster, reached through
// its seed addresses: decisions span the tenant's, the global and the provider's slots, a user's
// daily quota is one across both gateways, a job runs and is charged once, and the usage snapshot
// reads the one budget.
func TestGatewaysOnRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	cluster := redisserver.StartCluster(t)
	store := fmt.Sprintf("store:\n  type: redis\n  redis: {cluster: {addresses: [%s]}, replicas: 2}", strings.Join(cluster.Addrs, ", "))
	config := jobsConfig(t, up.URL, store, "jobs: {maxAttempts: 3, reclaimAfter: 1s}")
	a, b := startGateway(t, config), startGateway(t, config)

	for i := range 4 {
		g := []*gateway{a, b}[i%2]
		if got := g.post(t, "/v1/chat/completions", keyAlice, chatBody); got.status != http.StatusOK {
			t.Fatalf("call %d, alternating gateways: %d %s", i+1, got.status, got.body)
		}
	}
	added := a.addJob(t, keyAlice, chatJob)
	done := b.waitForJob(t, keyAlice, added.ID)
	if done.Status != "succeeded" {
		t.Fatalf("the job on Cluster ended %+v; want succeeded", done)
	}
	const calls = 5 // four live, one job
	if got := up.calls.Load(); got != calls {
		t.Errorf("the provider got %d calls; want %d", got, calls)
	}
	for _, g := range []*gateway{a, b} {
		for _, u := range g.usage(t).Tenants {
			if u.Name == "acme" && u.InFlight != 0 {
				t.Errorf("acme at %s: %d in flight after every call ended; want 0", g.api, u.InFlight)
			}
		}
	}
	// A sixth call reads, in the Cluster, what acme's 100,000 tokens a day have left: less the
	// usage of the five calls, each charged once, and this call's estimate.
	sixth := b.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if got, want := sixth.int(t, "X-Ratelimit-Remaining-Tokens"), int64(100000-calls*(upstreamPrompt+upstreamCompletion)-chatEstimate); got != want {
		t.Errorf("acme's tokens left after %d calls: %d; want %d", calls, got, want)
	}
}
