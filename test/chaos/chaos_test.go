// Package chaos breaks what the gateway depends on while it works: Redis killed and restarted
// under load, a gateway killed in the middle of its streams and jobs, a provider that stalls,
// answers garbage or hangs up. Everything runs as real processes on loopback; the tests assert
// what was lost and what was charged, never how long anything took.
package chaos

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// client bounds every call a test makes, so that a stuck gateway fails the test instead of
// hanging it.
var client = &http.Client{Timeout: time.Minute}

// processWait bounds each wait for a process to get somewhere: ready, reconnected, drained.
const processWait = 30 * time.Second

// gatewayBin and labBin are the binaries built once for the package's tests.
var gatewayBin, labBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "sluice-chaos")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bins, err := proc.Build(dir, "gateway", "lab")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		gatewayBin, labBin = bins[0], bins[1]
		return m.Run()
	}())
}

// skipShort skips a test under -short: every test here runs processes.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the gateway, Redis and a provider as processes; skipped with -short")
	}
}

// The tenant every test calls as, and its budget. Prices are $1 a million tokens in and out, so
// that a token costs a micro-dollar and money reads as tokens.
const (
	apiKey       = "sk-acme-alice"
	budgetMicros = 100_000_000
)

// settings are what a test's gateway configuration varies.
type settings struct {
	provider string // base URL, without /v1
	// store is the store's YAML (empty: memory); jobs the jobs' (empty: the defaults).
	store, jobs string
	// timeout, stallTimeout and callTimeout are the provider's (empty: the defaults).
	timeout, stallTimeout, callTimeout string
	maxInFlight                        int
	// limits is the YAML of the tenant's limits (empty: a day's tokens and a month's budget of
	// budgetMicros, limits no test reaches).
	limits string
	// recordFile is the record file the configuration names, beside it (empty: none).
	recordFile string
}

// redisStore is the YAML of a Redis store at addr failing as failMode says, for one replica:
// failing open, the gateway has the whole of each limit to itself.
func redisStore(addr, failMode string) string {
	return fmt.Sprintf("store:\n  type: redis\n  redis: {address: %q, failMode: %s, replicas: 1}", addr, failMode)
}

// writeConfig writes a gateway configuration: tenant acme (apiKey) on provider "lab", model
// gpt-4o-mini, with limits high enough that only a fault refuses a call. A call is tried once,
// so every arrival at the provider is one call.
func writeConfig(t *testing.T, s settings) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
%s
%s
%s
providers:
  - name: lab
    baseURL: %s/v1
    models:
      - {name: gpt-4o-mini, encoding: o200k_base}
    requestsPerMinute: 100000
    tokensPerMinute: 100000000
    maxInFlight: %d
    prices: {inputPerMillion: "1.00", outputPerMillion: "1.00"}
    retry: {maxAttempts: 1, baseDelay: 10ms, maxDelay: 10ms}
    timeout: %s
    stallTimeout: %s
    callTimeout: %s
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [lab]
%s
`, s.store, s.jobs, recordFiles(s.recordFile), s.provider, s.maxInFlight,
		cmp.Or(s.timeout, "60s"), cmp.Or(s.stallTimeout, "5m"), cmp.Or(s.callTimeout, "30m"), gatewayv1.HashKey(apiKey),
		cmp.Or(s.limits, fmt.Sprintf("    perTenant:\n      - {dimension: tokens, amount: 100000000, per: day}\n    budget: {amount: \"%d\", period: month}", budgetMicros/1_000_000)))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordFiles is the YAML that names a record file, or nothing.
func recordFiles(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf("recordFiles: [%s]", name)
}

// gateway is a running gateway process.
type gateway struct {
	api, admin string
	proc       *proc.Process
}

// startGateway runs the gateway on config, on free loopback ports, and waits until it is ready.
func startGateway(t *testing.T, config string) *gateway {
	t.Helper()
	api, admin := freeAddr(t), freeAddr(t)
	g := &gateway{api: "http://" + api, admin: "http://" + admin}
	g.proc = proc.Start(t, "gateway", exec.Command(gatewayBin, "--config", config, "--name", "gw-chaos", "--listen", api, "--admin-listen", admin))
	poll.Until(t, processWait, "the gateway to be ready", func() bool { return g.ready() == http.StatusOK })
	return g
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ready is the status of the gateway's /readyz, or 0 when it does not answer.
func (g *gateway) ready() int {
	resp, err := http.Get(g.admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// answer is a gateway's answer, read whole; a zero answer when the call failed.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// chat sends a chat completion of content, streamed or not, at most maxTokens long.
func (g *gateway) chat(content string, stream bool, maxTokens int) answer {
	body := fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%t,"max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, stream, maxTokens, content)
	return g.do(http.MethodPost, "/v1/chat/completions", body)
}

func (g *gateway) do(method, path, body string) answer {
	req, err := http.NewRequest(method, g.api+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: data, err: err}
}

// errorCode is the code of an OpenAI error body, or "" for any other body.
func (a answer) errorCode() string {
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if json.Unmarshal(a.body, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
		return ""
	}
	return e.Error.Code
}

// usage is the usage a JSON answer reports, in tokens: a micro-dollar each.
func (a answer) usage() int64 {
	var r struct {
		Usage struct {
			Total int64 `json:"total_tokens"`
		}
	}
	json.Unmarshal(a.body, &r)
	return r.Usage.Total
}

// snapshot returns the gateway's /admin/usage.
func (g *gateway) snapshot(t *testing.T) gatewayv1.Usage {
	t.Helper()
	var u gatewayv1.Usage
	resp, err := http.Get(g.admin + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

// tenantSpend is what the tenant has spent of its budget, in micro-dollars, as the gateway's
// store (Redis, when the limits live there) holds it.
func (g *gateway) tenantSpend(t *testing.T) int64 {
	t.Helper()
	return micros(t, g.snapshot(t).Tenants[0].SpendThisPeriod)
}

// providerSpend is what this gateway settled its calls to the provider at, in micro-dollars:
// its own count, whatever the store.
func (g *gateway) providerSpend(t *testing.T) int64 {
	t.Helper()
	return micros(t, g.snapshot(t).Providers[0].SpendThisMonth)
}

// inFlight is how many calls this gateway holds at its provider.
func (g *gateway) inFlight(t *testing.T) int64 {
	t.Helper()
	return g.snapshot(t).Providers[0].InFlight
}

func micros(t *testing.T, m gatewayv1.Money) int64 {
	t.Helper()
	if m == "" {
		return 0
	}
	n, err := m.MicroDollars()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// metric returns the value of the sample of the gateway's /metrics whose name and labels start
// with series (`name` or `name{label="value"`), summed over the series it matches; 0 if none.
func (g *gateway) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sample := regexp.MustCompile(`^` + regexp.QuoteMeta(series) + `[ {,}].*?(\S+)$`)
	var sum float64
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if m := sample.FindStringSubmatch(s.Text()); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatalf("metric %s: %v", s.Text(), err)
			}
			sum += v
		}
	}
	return sum
}
