// Package redisserver starts a private redis-server for a test, on a free loopback port, and stops
// it when the test ends. Tests never share a server or use the default port 6379.
package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/proc"
)

// startAttempts bounds the retries when another process takes the chosen port first.
const startAttempts = 5

// Server is a running redis-server owned by one test.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string
	proc *proc.Process
}

// Option changes how the server is started.
type Option func(*[]string)

// AppendOnly turns on append-only persistence into the test's temporary directory. By default the
// server keeps nothing on disk.
func AppendOnly() Option {
	return func(args *[]string) { *args = append(*args, "--appendonly", "yes") }
}

// RequirePass makes the server require password from its clients. Client does not send it.
func RequirePass(password string) Option {
	return func(args *[]string) { *args = append(*args, "--requirepass", password) }
}

// Start starts redis-server and waits until it answers PING. Under -short the test is skipped,
// because the fast loop needs no Redis.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("redisserver: needs redis-server; skipped with -short")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redisserver: redis-server is not installed: run `make test`, which installs it, or `apt-get install redis-server`")
	}
	var lastErr error
	for range startAttempts {
		s, err := start(t, bin, opts)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("redisserver: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string, opts []Option) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", t.TempDir(),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning",
	}
	for _, opt := range opts {
		opt(&args)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.proc = proc.Start(t, "redis-server", exec.Command(bin, args...))
	if err := s.waitReady(10 * time.Second); err != nil {
		s.proc.Stop()
		return nil, fmt.Errorf("start on port %d: %w\n%s", port, err, s.proc.Log())
	}
	return s, nil
}

// Client returns a client of the server that is closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// Stop stops the server before the test ends, for tests of an unreachable Redis.
func (s *Server) Stop() error { return s.proc.Stop() }

func (s *Server) waitReady(timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := c.Ping(ctx).Err()
		if err == nil || strings.HasPrefix(err.Error(), "NOAUTH") { // it answers, asking for its password
			return nil
		}
		select {
		case <-s.proc.Exited():
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
