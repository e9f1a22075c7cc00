package overhead

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ProxyCommand is the command of this program that serves the bare proxy
// in a process of its own, so that its CPU time can be read apart:
//
//	lab overhead-proxy UPSTREAM
//
// Run starts it; lab's usage does not list it. See RunProxy.
const ProxyCommand = "overhead-proxy"

// upstreamIdleConns is the idle connections the bare proxy keeps to the
// stub: as many as the gateway keeps to a provider without maxInFlight, and
// more than the default run's workers, so that neither pays for new
// connections the other does not.
const upstreamIdleConns = 256

// RunProxy serves a bare reverse proxy to the upstream URL args[0] on a
// free loopback port, writes the port's address as a line to stdout, and
// serves until ctx ends or stdin closes. Run closes it to stop the proxy,
// and the kernel closes it if Run's process dies.
func RunProxy(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("overhead: usage: %s UPSTREAM", ProxyCommand)
	}
	upstream, err := url.Parse(args[0])
	if err != nil {
		return fmt.Errorf("overhead: upstream: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("overhead: listen for the proxy: %w", err)
	}
	srv := &http.Server{Handler: newProxy(upstream), ReadHeaderTimeout: requestTimeout}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := fmt.Fprintln(stdout, ln.Addr()); err != nil {
		srv.Close()
		return fmt.Errorf("overhead: tell the proxy's address: %w", err)
	}
	select {
	case err := <-served:
		return fmt.Errorf("overhead: serve the proxy: %w", err)
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), stopTimeout)
	defer stop()
	return srv.Shutdown(shutdown)
}

// newProxy is the bare proxy: the standard library's reverse proxy in front
// of upstream, with a pool of the buffers it copies answers through, as a
// proxy built for load has, and nothing else.
func newProxy(upstream *url.URL) *httputil.ReverseProxy {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = upstreamIdleConns, upstreamIdleConns // the first caps every host together: 100 by default
	return &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		Transport:  transport,
		BufferPool: &copyBuffers{},
	}
}

// copyBuffers is an httputil.BufferPool of 32 KiB buffers, the size the
// reverse proxy allocates for each answer without one.
type copyBuffers struct{ pool sync.Pool }

func (p *copyBuffers) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *copyBuffers) Put(b []byte) { p.pool.Put(&b) }

// startProxy starts self's ProxyCommand in front of upstream, its log in
// dir, and returns it with its base URL once it listens.
func startProxy(self, dir, upstream string) (*process, string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("overhead: pipe from the proxy: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(self, ProxyCommand, upstream)
	cmd.Stdout = w
	p, err := startProcess(cmd, filepath.Join(dir, "proxy.log"))
	w.Close() // the child has its own copy
	if err != nil {
		return nil, "", err
	}
	addr, err := readAddr(r)
	if err != nil {
		p.Stop()
		return nil, "", fmt.Errorf("%w\n%s", err, p.Log())
	}
	return p, "http://" + addr, nil
}

// readAddr reads the address the proxy writes once it listens.
func readAddr(r *os.File) (string, error) {
	if err := r.SetReadDeadline(time.Now().Add(readyTimeout)); err != nil {
		return "", fmt.Errorf("overhead: wait for the proxy: %w", err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("overhead: the proxy did not say where it listens: %w", err)
	}
	addr := strings.TrimSpace(line)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("overhead: the proxy said it listens on %q", addr)
	}
	return addr, nil
}
