// Package gatewayproc runs the gateway binary for the lab: its configuration written and checked,
// free loopback ports, readiness, its log, and stopping it.
package gatewayproc

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

const (
	// readyTimeout bounds the wait for the gateway's /readyz.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long the gateway has to exit after SIGTERM before it is killed.
	stopTimeout = 10 * time.Second
	// logTail is how much of the gateway's output an error quotes.
	logTail = 4 << 10
)

// DefaultBinary is where the lab's commands look for the gateway binary unless told otherwise:
// where `go build -o bin/gateway ./cmd/gateway` puts it, run from the repository's root.
const DefaultBinary = "bin/gateway"

// flagName is the lab's commands' flag for the gateway binary's path.
const flagName = "gateway"

// AddFlag registers the flag -gateway on fs: the path of the gateway binary, into *path, whose
// value is the default, with usage as its help.
func AddFlag(fs *flag.FlagSet, path *string, usage string) {
	fs.StringVar(path, flagName, *path, usage)
}

// CheckBinary reports, saying how to build one, when there is no gateway binary at path: a run
// checks before it starts anything.
func CheckBinary(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("gatewayproc: the gateway binary (go build -o %s ./cmd/gateway, or --%s): %w", DefaultBinary, flagName, err)
	}
	return nil
}

// Gateway is a running gateway process with a temporary directory of its own. Its methods are
// safe for concurrent use.
type Gateway struct {
	// URL and Admin are the base URLs of the API and of the admin endpoints.
	URL, Admin string

	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

// WriteConfig writes cfg into dir as gateway.yaml, with files (name to content, such as a
// provider's key) beside it, and returns the configuration's path. It refuses a configuration
// the gateway would refuse.
func WriteConfig(dir string, cfg gatewayv1.Config, files map[string]string) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err == nil {
		_, err = gatewayv1.Parse(data)
	}
	if err != nil {
		return "", fmt.Errorf("gatewayproc: configuration: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("gatewayproc: %s: %w", name, err)
		}
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("gatewayproc: configuration: %w", err)
	}
	return path, nil
}

// Start writes cfg and files into a new temporary directory, starts the gateway binary bin on
// free loopback ports under name (its name in the usage snapshot), with env (NAME=value) added to
// its environment, and waits until it is ready.
func Start(ctx context.Context, bin, name string, cfg gatewayv1.Config, files map[string]string, env ...string) (*Gateway, error) {
	dir, err := os.MkdirTemp("", "lab-gateway-")
	if err != nil {
		return nil, fmt.Errorf("gatewayproc: directory: %w", err)
	}
	g, err := launch(bin, name, dir, cfg, files, env)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := g.waitReady(ctx); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

func launch(bin, name, dir string, cfg gatewayv1.Config, files map[string]string, env []string) (*Gateway, error) {
	config, err := WriteConfig(dir, cfg, files)
	if err != nil {
		return nil, err
	}
	api, admin, err := freeAddrs()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		return nil, fmt.Errorf("gatewayproc: log: %w", err)
	}
	cmd := exec.Command(bin, "--config", config, "--listen", api, "--admin-listen", admin, "--name", name)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...) // a later value of a name wins
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("gatewayproc: start %s: %w", bin, err)
	}
	g := &Gateway{URL: "http://" + api, Admin: "http://" + admin, cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // how it ended is in its log
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
			return "", "", fmt.Errorf("gatewayproc: find a free port: %w", err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs[0], addrs[1], nil
}

// waitReady polls /readyz until it answers 200, the gateway exits, ctx ends or readyTimeout
// passes.
func (g *Gateway) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !g.ready(ctx) {
		select {
		case <-g.exited:
			return fmt.Errorf("gatewayproc: the gateway exited before it was ready:\n%s", g.Log())
		case <-ctx.Done():
			return fmt.Errorf("gatewayproc: the gateway was not ready in time: %w\n%s", ctx.Err(), g.Log())
		case <-tick.C:
		}
	}
	return nil
}

func (g *Gateway) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.Admin+"/readyz", nil)
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

// Pid is the gateway's process id.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// Exited is closed when the gateway has exited.
func (g *Gateway) Exited() <-chan struct{} { return g.exited }

// Log is the end of the gateway's output.
func (g *Gateway) Log() string {
	out, err := os.ReadFile(filepath.Join(g.dir, "gateway.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out[max(len(out)-logTail, 0):])
}

// Terminate sends cmd's process SIGTERM and waits until exited is closed, killing the process if
// it has not exited after stopTimeout.
func Terminate(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Stop sends the gateway SIGTERM, kills it if it has not exited after stopTimeout, and removes
// its directory.
func (g *Gateway) Stop() {
	Terminate(g.cmd, g.exited)
	os.RemoveAll(g.dir)
}
