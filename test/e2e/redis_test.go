package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestGatewaysShareRedis runs two gateways on one Redis: a user's daily quota is one quota across
// both, and when Redis goes away a gateway that fails closed refuses with 503 and says it is not
// ready.
func TestGatewaysShareRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	redis := redisserver.Start(t)
	config := writeRedisConfig(t, up.URL, redis.Addr, "closed")
	a, b := startGateway(t, config), startGateway(t, config)

	for i := range 5 {
		g := []*gateway{a, b}[i%2]
		if got := g.post(t, "/v1/chat/completions", keyCarol, chatBody); got.status != http.StatusOK {
			t.Fatalf("call %d of carol's 5 a day, alternating gateways: %d %s", i+1, got.status, got.body)
		}
	}
	for _, g := range []*gateway{a, b} {
		if got := g.post(t, "/v1/chat/completions", keyCarol, chatBody); got.status != http.StatusTooManyRequests {
			t.Errorf("sixth call: %d %s; want 429 from either gateway", got.status, got.body)
		}
	}

	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	down := a.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if down.status != http.StatusServiceUnavailable || down.errorCode(t) != "limiter_unavailable" {
		t.Errorf("with Redis gone: %d %s; want 503 limiter_unavailable", down.status, down.body)
	}
	resp, err := http.Get(a.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis gone = %d; want 503", resp.StatusCode)
	}
	if !strings.Contains(a.metrics(t), "sluice_gateway_store_up 0") {
		t.Error("sluice_gateway_store_up does not say the store is down")
	}
}

// TestGatewayFailsOpen checks that a gateway whose Redis goes away, with failMode open, keeps
// serving calls that only rates limit, on its own share of each, and answers 503 to calls that a
// day's quota or a month's budget covers: those never start again from full.
func TestGatewayFailsOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	redis := redisserver.Start(t)
	config := writeRedisConfig(t, up.URL, redis.Addr, "open")
	g := startGateway(t, config)
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}

	var carol []int
	for range 3 {
		carol = append(carol, g.post(t, "/v1/chat/completions", keyCarol, chatBody).status)
	}
	if want := []int{503, 503, 503}; !slices.Equal(carol, want) {
		t.Errorf("carol's calls with Redis gone = %v; want %v: a quota of 5 a day and a budget cover them", carol, want)
	}
	m := g.metrics(t)
	for _, want := range []string{"sluice_gateway_store_up 0", `sluice_gateway_store_errors_total{action="refused"} 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("the metrics do not say %s", want)
		}
	}
	bobBody := strings.Replace(chatBody, "gpt-4o-mini", "other-model", 1)
	if got := g.post(t, "/v1/chat/completions", keyBob, bobBody); got.status != http.StatusOK {
		t.Errorf("bob's call with Redis gone = %d %s; want 200: no calendar window covers it", got.status, got.body)
	}
	resp, err := http.Get(g.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz failing open = %d; want 200: the gateway still serves", resp.StatusCode)
	}
}

// writeRedisConfig writes the test configuration (writeConfig's) with the limits in the Redis at
// addr, for two replicas, failing as failMode says; it returns its path.
func writeRedisConfig(t *testing.T, upstreamURL, addr, failMode string) string {
	t.Helper()
	config := writeConfig(t, t.TempDir(), upstreamURL)
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	store := "store:\n  type: redis\n  redis: {address: \"" + addr + "\", failMode: " + failMode + ", replicas: 2}\nserver:\n"
	writeAtomically(t, config, strings.Replace(string(data), "server:\n", store, 1))
	return config
}

// TestGatewayAuthenticatesToRedis runs a gateway on a Redis that requires a password, which it
// reads from the file its configuration names: its limits live in that Redis. A gateway given the
// wrong password says it is not ready and logs Redis's refusal. Neither logs a password.
func TestGatewayAuthenticatesToRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	const password, wrong = "redis-pass-7f3a9c2e51d8", "not-the-pass-40b1e9a7"
	up := newUpstream(t)
	server := redisserver.Start(t, redisserver.RequirePass(password))
	config := writeRedisConfig(t, up.URL, server.Addr, "closed")

	g := startGateway(t, withRedisPassword(t, config, password, ""))
	if got := g.post(t, "/v1/chat/completions", keyAlice, chatBody); got.status != http.StatusOK {
		t.Fatalf("a call through the gateway on the password-protected Redis: %d %s", got.status, got.body)
	}
	if keys, err := server.ClientAs(t, "", password).Keys(context.Background(), "{*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("limiter keys in Redis: %v, %v; want the call's", keys, err)
	}

	refused := startUnready(t, withRedisPassword(t, writeRedisConfig(t, up.URL, server.Addr, "closed"), wrong, ""), "WRONGPASS")
	for _, p := range []*proc.Process{g.proc, refused} {
		if log := p.Log(); strings.Contains(log, password) || strings.Contains(log, wrong) {
			t.Errorf("a gateway's log holds a Redis password:\n%s", log)
		}
	}
}

// TestGatewayReachesRedisOverTLS runs a gateway on a Redis that speaks only TLS and knows one ACL
// user: with the CA that signed Redis's certificate it logs in as that user and its limits live
// there; without that CA, or expecting a name the certificate does not carry, it does not trust
// Redis and is not ready.
func TestGatewayReachesRedisOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	const user, password = "sluice", "redis-pass-51d8e07c2b"
	up := newUpstream(t)
	server := redisserver.Start(t, redisserver.TLS(), redisserver.OnlyUser(user, password))

	trusting := "username: " + user + ", tls: {caFile: " + server.CAFile + "}, "
	g := startGateway(t, withRedisPassword(t, writeRedisConfig(t, up.URL, server.Addr, "closed"), password, trusting))
	if got := g.post(t, "/v1/chat/completions", keyAlice, chatBody); got.status != http.StatusOK {
		t.Fatalf("a call through the gateway on Redis over TLS: %d %s", got.status, got.body)
	}
	if keys, err := server.ClientAs(t, user, password).Keys(context.Background(), "{*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("limiter keys in Redis: %v, %v; want the call's", keys, err)
	}

	systemRoots := "username: " + user + ", tls: {}, "
	startUnready(t, withRedisPassword(t, writeRedisConfig(t, up.URL, server.Addr, "closed"), password, systemRoots), "certificate signed by unknown authority")
	otherName := "username: " + user + ", tls: {caFile: " + server.CAFile + ", serverName: redis.example}, "
	startUnready(t, withRedisPassword(t, writeRedisConfig(t, up.URL, server.Addr, "closed"), password, otherName), "wanted to match redis.example")
}

// TestGatewaySaysAStoreChangeTakesARestart reloads the configuration twice: keeping the store,
// quietly; then moving the limits from memory to Redis, when the gateway keeps its store and logs
// that a restart is needed.
func TestGatewaySaysAStoreChangeTakesARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	config := writeConfig(t, t.TempDir(), up.URL)
	g := startGateway(t, config)
	same, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, config, string(same)+"# the same store\n")
	poll.Until(t, processWait, "the gateway to reload", func() bool { return strings.Contains(g.proc.Log(), "configuration reloaded") })
	if strings.Contains(g.proc.Log(), "changes the store") {
		t.Errorf("a reload that keeps the store says it changes:\n%s", g.proc.Log())
	}
	redisConfig := writeRedisConfig(t, up.URL, "127.0.0.1:1", "closed")
	data, err := os.ReadFile(redisConfig)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, config, string(data))
	poll.Until(t, processWait, "the gateway to log that the store changes only at a restart", func() bool {
		return strings.Contains(g.proc.Log(), "the configuration changes the store")
	})
	if got := g.post(t, "/v1/chat/completions", keyAlice, chatBody); got.status != http.StatusOK {
		t.Errorf("a call after the reload: %d %s; want 200 from the memory store it started with", got.status, got.body)
	}
}

// startUnready runs a gateway whose store refuses it, and waits until it says it is not ready and
// logs why (want); it returns the process.
func startUnready(t *testing.T, config, want string) *proc.Process {
	t.Helper()
	admin := freeAddr(t)
	p := startGatewayProcess(t, config, freeAddr(t), admin)
	poll.Until(t, processWait, "the gateway to answer /readyz with 503", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	poll.Until(t, processWait, "the gateway to log "+want, func() bool { return strings.Contains(p.Log(), want) })
	for _, line := range strings.Split(strings.TrimSpace(p.Log()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a line of the gateway's log is not JSON: %s", line)
		}
	}
	return p
}

// withRedisPassword writes password to a file beside config and names it as the Redis password
// in config, with more settings of the Redis store ("key: value, "); it returns config.
func withRedisPassword(t *testing.T, config, password, more string) string {
	t.Helper()
	file := filepath.Join(filepath.Dir(config), "redis-password")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, config, strings.Replace(string(data), "failMode:", more+"passwordFile: redis-password, failMode:", 1))
	return config
}
