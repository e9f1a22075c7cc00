package gatewayproc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// The learned-limits test: a lab account of 120 requests per minute behind a gateway whose
// configuration says 6,000, and no maxInFlight.
const (
	labRPM        = 120
	configuredRPM = 6000
	learnedKey    = "sk-learned"
	smallCall     = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
)

// TestTheGatewayPacesToTheLimitsTheProviderReports runs the gateway binary in front of a `lab
// provider` process whose account allows a fiftieth of what the gateway's configuration says.
// One call teaches the gateway the lab's limits from its x-ratelimit-* headers, and the usage
// snapshot reports them; a burst through the gateway then draws no 429 from the lab.
func TestTheGatewayPacesToTheLimitsTheProviderReports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway and lab binaries")
	}
	lab, g := startLearning(t)

	// 150 calls at once: the gateway's configured rolling minute (6,000) would let them all go,
	// and the lab would answer 429 to those past its 120; the learned one, paced (a burst of 2,
	// then about 2 a second), lets go a handful and never more than the lab's minute holds after
	// the first call, 119, and the rest wait past their second of maxWait.
	sendSmall(t.Context(), g.URL, learnedKey, 150)
	st := labStats(t, lab)
	t.Logf("of 150 calls at once, the gateway sent the lab %d", st.Accepted-1)
	if st.Accepted-1 > labRPM-1 || st.Rejected429Requests != 0 {
		t.Errorf("the lab took %d of 150 calls at once and answered %d 429; want at most %d, as the learned limits hold, and no 429",
			st.Accepted-1, st.Rejected429Requests, labRPM-1)
	}
}

// TestTheGatewayBacksOffWhenTheProvidersMinuteRunsOut runs the gateway binary in front of a `lab
// provider` as above. Once another client of the same account has used up its minute, the 429s
// the lab answers the gateway stay, after the calls the gateway had already let go, under a
// small bound however many calls wait (the queue pauses), and the snapshot reports the
// in-flight cap the throttles left.
func TestTheGatewayBacksOffWhenTheProvidersMinuteRunsOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway and lab binaries")
	}
	lab, g := startLearning(t)

	// Another client of the account uses up its minute. The gateway's own minute still has room
	// for the next 30 calls at once, so as many as its pace lets go (up to all 30) may be
	// answered 429 before the first answer pauses the queue; the 60 calls after it draw at most
	// a few more.
	sendSmall(t.Context(), lab, "", labRPM)
	before := labStats(t, lab).Rejected429Requests
	sendSmall(t.Context(), g.URL, learnedKey, 30)
	first := labStats(t, lab).Rejected429Requests - before
	for range 2 {
		sendSmall(t.Context(), g.URL, learnedKey, 30)
	}
	throttled := labStats(t, lab).Rejected429Requests - before
	t.Logf("the lab answered the gateway's 90 calls after its minute ran out with %d 429s, %d of them to the first 30", throttled, first)
	if first == 0 || first > 30 || throttled-first > 3 {
		t.Errorf("the lab answered %d of the gateway's first 30 calls 429 after its minute ran out, and %d of the 60 after; want 1 to 30, then at most 3: the first pauses the queue",
			first, throttled-first)
	}
	u := labUsage(t, g)
	if u.Throttles != throttled || u.ThrottledInFlight == 0 {
		t.Errorf("snapshot: %d throttles, an in-flight cap of %d; want %d throttles and a cap", u.Throttles, u.ThrottledInFlight, throttled)
	}
}

// startLearning starts a lab account of labRPM requests a minute and a gateway in front of it
// configured for configuredRPM, stopped when the test ends, and sends one call, which teaches
// the gateway the lab's limits: the usage snapshot reports them.
func startLearning(t *testing.T) (lab string, g *Gateway) {
	t.Helper()
	lab = startLabProvider(t, "-requests-per-minute", fmt.Sprint(labRPM), "-latency", "0", "-latency-stddev", "0", "-max-in-flight", "1000")
	g, err := Start(t.Context(), gatewayBin, "learned", learnedConfig(lab), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	if served := sendSmall(t.Context(), g.URL, learnedKey, 1); served != 1 {
		t.Fatalf("the first call was not served:\n%s", g.Log())
	}
	want := gatewayv1.LearnedLimits{RequestsPerMinute: labRPM, TokensPerMinute: provider.DefaultOptions().TokensPerMinute}
	if got := labUsage(t, g).LearnedLimits; got == nil || *got != want {
		t.Fatalf("learned limits in the snapshot = %+v; want %+v", got, want)
	}
	return lab, g
}

// learnedConfig is a gateway in front of the lab at url whose configuration overstates the
// lab's requests per minute and caps no calls in flight.
func learnedConfig(url string) gatewayv1.Config {
	return gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "lab", BaseURL: url + "/v1", RequestsPerMinute: configuredRPM,
			Models: []gatewayv1.Model{{Name: "gpt-4o-mini", Encoding: "o200k_base", DefaultMaxTokens: 5}},
			Retry:  gatewayv1.Retry{MaxAttempts: 1},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name: "learner", Providers: []string{"lab"},
			Keys:    []gatewayv1.Key{{SHA256: gatewayv1.HashKey(learnedKey), User: "u"}},
			MaxWait: metav1.Duration{Duration: time.Second},
		}},
	}
}

// startLabProvider builds and starts `lab provider` with args on a free port, stopped when the
// test ends, and returns its base URL.
func startLabProvider(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lab")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/lab").CombinedOutput(); err != nil {
		t.Fatalf("build the lab: %v\n%s", err, out)
	}
	addr, _, err := freeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"provider", "-listen", addr}, args...)...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := "http://" + addr
	for range 200 {
		if resp, err := http.Get(url + "/stats"); err == nil {
			resp.Body.Close()
			return url
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the lab provider did not answer:\n%s", log.String())
	return ""
}

// sendSmall sends n small calls at once with key to the API at url and returns how many were
// answered 200.
func sendSmall(ctx context.Context, url, key string, n int) int {
	return sendAtOnce(ctx, url, key, smallCall, n)
}

// labStats reads the lab's counts.
func labStats(t *testing.T, url string) provider.Stats {
	t.Helper()
	var st provider.Stats
	getJSON(t, url+"/stats", &st)
	return st
}

// labUsage reads the gateway's usage of the lab provider.
func labUsage(t *testing.T, g *Gateway) gatewayv1.ProviderUsage {
	t.Helper()
	var u gatewayv1.Usage
	getJSON(t, g.Admin+"/admin/usage", &u)
	for _, p := range u.Providers {
		if p.Name == "lab" {
			return p
		}
	}
	t.Fatalf("no usage of the lab in %+v", u)
	return gatewayv1.ProviderUsage{}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
