package ramp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

const (
	// gatewayReady bounds the wait for a gateway's /readyz.
	gatewayReady = 20 * time.Second
	// gatewayStop is how long a gateway has to exit after SIGTERM before
	// it is killed.
	gatewayStop = 10 * time.Second
	// providerName and tenantName name the provider and the one tenant in
	// the gateway's configuration.
	providerName = "lab"
	tenantName   = "ramp"
	// providerKeyFile holds the provider's key, beside the configuration.
	providerKeyFile = "provider.key"
)

// userKey is the API key of user in a gateway case.
func userKey(user int) string { return fmt.Sprintf("sk-ramp-user-%03d", user) }

// gatewayConfig is the gateway's configuration for a case whose limits
// behave as b, in front of the provider at providerURL, for users users.
//
// Both behaviours limit each user to a token bucket (UserBurst, UserRate a
// second) and everyone together to the provider's requests per minute. A
// queue drains on the provider's budgets, so Queue also gives the gateway
// the provider's published requests, tokens and calls in flight; Reject
// keeps to the two limits a plain token-bucket limiter has.
func gatewayConfig(opts Options, b gatewayv1.Behavior, providerURL string, users int) gatewayv1.Config {
	p := opts.Provider
	prov := gatewayv1.Provider{
		Name:    providerName,
		BaseURL: providerURL + "/v1",
		Prices:  pricesOf(p),
	}
	for _, m := range p.Models {
		prov.Models = append(prov.Models, gatewayv1.Model{Name: m, DefaultMaxTokens: p.DefaultMaxTokens})
	}
	if p.APIKey != "" {
		prov.APIKeyFile = providerKeyFile
	}
	if b == gatewayv1.BehaviorQueue {
		prov.RequestsPerMinute, prov.TokensPerMinute, prov.MaxInFlight = p.RequestsPerMinute, p.TokensPerMinute, p.MaxInFlight
	}
	return gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Global:     []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: p.RequestsPerMinute, Per: gatewayv1.PeriodMinute, OnLimit: b}},
		Providers:  []gatewayv1.Provider{prov},
		Tenants:    []gatewayv1.Tenant{rampTenant(opts, b, users)},
	}
}

// rampTenant is the one tenant of a gateway case, with a key for each of
// users users and a bucket for each.
func rampTenant(opts Options, b gatewayv1.Behavior, users int) gatewayv1.Tenant {
	t := gatewayv1.Tenant{
		Name:      tenantName,
		Providers: []string{providerName},
		PerUser:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: opts.UserRate, Per: gatewayv1.PeriodSecond, Burst: opts.UserBurst, OnLimit: b}},
		MaxWait:   metav1.Duration{Duration: opts.MaxWait},
	}
	for u := range users {
		t.Keys = append(t.Keys, gatewayv1.Key{SHA256: gatewayv1.HashKey(userKey(u)), User: fmt.Sprintf("user-%03d", u)})
	}
	return t
}

// writeGatewayConfig writes cfg, and the provider's key if it has one, into
// dir, and returns the configuration's path. It refuses a configuration the
// gateway would refuse.
func writeGatewayConfig(dir string, cfg gatewayv1.Config, providerKey string) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("ramp: gateway config: %w", err)
	}
	if _, err := gatewayv1.Parse(data); err != nil {
		return "", fmt.Errorf("ramp: gateway config: %w", err)
	}
	if providerKey != "" {
		if err := os.WriteFile(filepath.Join(dir, providerKeyFile), []byte(providerKey+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("ramp: provider key: %w", err)
		}
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("ramp: gateway config: %w", err)
	}
	return path, nil
}

// gatewayProc is a gateway process the ramp started, with its own
// temporary directory. Its methods are safe for concurrent use.
type gatewayProc struct {
	cmd        *exec.Cmd
	dir        string
	url, admin string // base URLs of the API and the admin endpoints
	exited     chan struct{}
}

// startGateway starts the gateway binary bin with cfg on free loopback
// ports and waits until it is ready.
func startGateway(ctx context.Context, bin string, cfg gatewayv1.Config, providerKey string) (*gatewayProc, error) {
	dir, err := os.MkdirTemp("", "lab-ramp-gateway-")
	if err != nil {
		return nil, fmt.Errorf("ramp: gateway directory: %w", err)
	}
	g, err := launch(bin, dir, cfg, providerKey)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := g.waitReady(ctx); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// launch writes the configuration into dir and starts the gateway, its
// output going to a log file beside it.
func launch(bin, dir string, cfg gatewayv1.Config, providerKey string) (*gatewayProc, error) {
	config, err := writeGatewayConfig(dir, cfg, providerKey)
	if err != nil {
		return nil, err
	}
	api, admin, err := freeAddrs()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		return nil, fmt.Errorf("ramp: gateway log: %w", err)
	}
	cmd := exec.Command(bin, "--config", config, "--listen", api, "--admin-listen", admin, "--name", "lab-ramp")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("ramp: start the gateway: %w", err)
	}
	g := &gatewayProc{cmd: cmd, dir: dir, url: "http://" + api, admin: "http://" + admin, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the gateway's exit is read from its log
		log.Close()
		close(g.exited)
	}()
	return g, nil
}

// freeAddrs are two loopback addresses free a moment ago.
func freeAddrs() (string, string, error) {
	var addrs [2]string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("ramp: find a free port for the gateway: %w", err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs[0], addrs[1], nil
}

// waitReady polls /readyz until it answers 200, the gateway exits, ctx
// ends or gatewayReady passes.
func (g *gatewayProc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, gatewayReady)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !g.ready(ctx) {
		select {
		case <-g.exited:
			return fmt.Errorf("ramp: the gateway exited before it was ready:\n%s", g.log())
		case <-ctx.Done():
			return fmt.Errorf("ramp: the gateway was not ready in time: %w\n%s", ctx.Err(), g.log())
		case <-tick.C:
		}
	}
	return nil
}

func (g *gatewayProc) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.admin+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// log is the end of the gateway's output.
func (g *gatewayProc) log() string {
	const tail = 4 << 10
	out, err := os.ReadFile(filepath.Join(g.dir, "gateway.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out[max(len(out)-tail, 0):])
}

// stop sends the gateway SIGTERM, kills it if it has not exited after
// gatewayStop, and removes its directory.
func (g *gatewayProc) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	select {
	case <-g.exited:
	case <-time.After(gatewayStop):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
	os.RemoveAll(g.dir)
}
