// Package redisserver starts a private redis-server for a test, on a free loopback port, and stops
// it when the test ends. Tests never share a server or use the default port 6379.
package redisserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/testcert"
)

// startAttempts bounds the retries when another process takes the chosen port first.
const startAttempts = 5

// Server is a running redis-server owned by one test.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string
	// CAFile is the PEM file of the CA that signed the server's certificate, when it speaks TLS.
	CAFile string
	proc   *proc.Process
	// t, bin and args (which hold its directory) start the server again in Restart.
	t    testing.TB
	bin  string
	args []string
}

// Option changes how the server is started.
type Option func(*settings)

type settings struct {
	args    []string // added to redis-server's
	tls     bool
	cluster bool // a node of a Redis Cluster, with a cluster bus port of its own
}

// AppendOnly turns on append-only persistence into the test's temporary directory. By default the
// server keeps nothing on disk.
func AppendOnly() Option {
	return func(s *settings) { s.args = append(s.args, "--appendonly", "yes") }
}

// Durable turns on append-only persistence with an fsync before every reply: whatever the server
// acknowledged survives Kill and Restart.
func Durable() Option {
	return func(s *settings) { s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always") }
}

// RequirePass makes the server require password from its clients. Client does not send it.
func RequirePass(password string) Option {
	return func(s *settings) { s.args = append(s.args, "--requirepass", password) }
}

// OnlyUser turns the default user off and adds an ACL user that may do everything. Client does not
// log in as it.
func OnlyUser(name, password string) Option {
	return func(s *settings) {
		s.args = append(s.args, "--user", "default", "off", "--user", name, "on", ">"+password, "~*", "&*", "+@all")
	}
}

// DebugCommand allows the DEBUG command from local clients, so that a test can stall the server
// with DEBUG SLEEP.
func DebugCommand() Option {
	return func(s *settings) { s.args = append(s.args, "--enable-debug-command", "local") }
}

// TLS makes the server speak only TLS, with a certificate for 127.0.0.1 signed by a throwaway CA
// (Server.CAFile). Client trusts it.
func TLS() Option {
	return func(s *settings) { s.tls = true }
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
	var set settings
	for _, opt := range opts {
		opt(&set)
	}
	dir := t.TempDir()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, bin: bin}
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}
	if set.tls {
		if args, err = s.tlsArgs(dir, port); err != nil {
			return nil, err
		}
	}
	args = append(args, "--dir", dir, "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
	if set.cluster {
		if args, err = clusterArgs(args); err != nil {
			return nil, err
		}
	}
	s.args = append(args, set.args...)
	if err := s.run(); err != nil {
		return nil, fmt.Errorf("start on port %d: %w", port, err)
	}
	return s, nil
}

// run starts redis-server with the server's arguments and waits until it answers.
func (s *Server) run() error {
	s.proc = proc.Start(s.t, "redis-server", exec.Command(s.bin, s.args...))
	if err := s.waitReady(10 * time.Second); err != nil {
		s.proc.Stop()
		return fmt.Errorf("%w\n%s", err, s.proc.Log())
	}
	return nil
}

// tlsArgs writes a CA and a server certificate into dir and returns the arguments that make
// redis-server speak only TLS on port.
func (s *Server) tlsArgs(dir string, port int) ([]string, error) {
	ca, caKey, err := testcert.New(&x509.Certificate{
		Subject: pkix.Name{CommonName: "sluice-test-redis-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	cert, key, err := testcert.New(&x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	if err != nil {
		return nil, err
	}
	s.CAFile = filepath.Join(dir, "ca.crt")
	certFile, keyFile := filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key")
	for _, err := range []error{testcert.WriteCert(s.CAFile, ca), testcert.WriteCert(certFile, cert), testcert.WriteKey(keyFile, key)} {
		if err != nil {
			return nil, err
		}
	}
	return []string{"--bind", "127.0.0.1", "--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", s.CAFile, "--tls-auth-clients", "no"}, nil
}

// Client returns a client of the server, as the default user, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client { return s.ClientAs(t, "", "") }

// ClientAs returns a client of the server logged in as an ACL user (empty: the default user) with
// password, closed when the test ends.
func (s *Server) ClientAs(t testing.TB, username, password string) *redis.Client {
	c := s.client(redis.Options{Username: username, Password: password})
	t.Cleanup(func() { c.Close() })
	return c
}

// client returns a client with opts, and the server's address and TLS configuration.
func (s *Server) client(opts redis.Options) *redis.Client {
	opts.Addr = s.Addr
	if s.CAFile != "" {
		pool := x509.NewCertPool()
		if data, err := os.ReadFile(s.CAFile); err == nil {
			pool.AppendCertsFromPEM(data)
		}
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	return redis.NewClient(&opts)
}

// Stop stops the server before the test ends, for tests of an unreachable Redis.
func (s *Server) Stop() error { return s.proc.Stop() }

// Kill ends the server with SIGKILL, as a crash would: it writes nothing more and its clients'
// connections break.
func (s *Server) Kill() { s.proc.Kill() }

// Restart starts a stopped or killed server again on its address, with its arguments and its
// directory, so that a Durable server comes back with what it had acknowledged. It fails the
// test if the port was taken meanwhile.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.run(); err != nil {
		s.t.Fatalf("redisserver: restart on %s: %v", s.Addr, err)
	}
}

func (s *Server) waitReady(timeout time.Duration) error {
	c := s.client(redis.Options{MaxRetries: -1})
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
