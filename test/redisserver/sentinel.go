package redisserver

import (
	"context"
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

	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// MasterName is the name a SentinelGroup's sentinels monitor their primary under.
const MasterName = "sluice"

// sentinelWait bounds the wait for the sentinels to know their group: the primary, its replica
// and each other.
const sentinelWait = 30 * time.Second

// SentinelGroup is a primary, its replica and three sentinels that monitor it under MasterName
// with a quorum of two, on loopback, owned by one test. A sentinel holds the primary down after
// one second without an answer, and promotes the replica then.
type SentinelGroup struct {
	// Primary and Replica are the data servers as started. After a failover the replica is the
	// primary; ask the sentinels (PrimaryAddr) which one it is.
	Primary, Replica *Server
	// Sentinels are the sentinels' host:port.
	Sentinels []string
	procs     []*proc.Process
}

// StartSentinel starts a sentinel group with each option on both data servers, and waits until
// every sentinel knows the primary, the replica and the two other sentinels, so that a failover
// can happen. Under -short the test is skipped.
func StartSentinel(t testing.TB, opts ...Option) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{Primary: Start(t, opts...)}
	g.Replica = Start(t, append(opts, replicaOf(g.Primary.Addr))...)
	for i := range 3 {
		addr, p, err := startSentinel(t, g.Primary.Addr, i)
		if err != nil {
			t.Fatalf("redisserver: sentinel %d: %v", i, err)
		}
		g.Sentinels, g.procs = append(g.Sentinels, addr), append(g.procs, p)
	}
	poll.Until(t, sentinelWait, "the replica to follow the primary and every sentinel to know its group", g.known)
	return g
}

// replicaOf makes the server replicate primary.
func replicaOf(primary string) Option {
	host, port, _ := net.SplitHostPort(primary)
	return func(s *settings) { s.args = append(s.args, "--replicaof", host, port) }
}

// startSentinel starts sentinel i of the primary's group from a configuration file of its own,
// which the sentinel rewrites as it learns its group.
func startSentinel(t testing.TB, primary string, i int) (string, *proc.Process, error) {
	host, port, _ := net.SplitHostPort(primary)
	var lastErr error
	for range startAttempts {
		free, err := freePort()
		if err != nil {
			return "", nil, err
		}
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nloglevel warning\n"+
			"sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %[3]s 1000\nsentinel failover-timeout %[3]s 5000\n",
			free, dir, MasterName, host, port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return "", nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(free))
		p := proc.Start(t, "redis-sentinel-"+strconv.Itoa(i), exec.Command("redis-server", conf, "--sentinel"))
		if lastErr = waitPing(addr, p); lastErr == nil {
			return addr, p, nil
		}
		p.Stop()
	}
	return "", nil, lastErr
}

// waitPing waits until the server at addr answers PING, or its process exits.
func waitPing(addr string, p *proc.Process) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("exited: %s", p.Log())
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// known reports whether the replica follows the primary and every sentinel knows it and the
// two other sentinels.
func (g *SentinelGroup) known() bool {
	ctx := context.Background()
	replica := g.Replica.client(redis.Options{})
	info, err := replica.Info(ctx, "replication").Result()
	replica.Close()
	if err != nil || !strings.Contains(info, "master_link_status:up") {
		return false
	}
	for _, addr := range g.Sentinels {
		s := redis.NewSentinelClient(&redis.Options{Addr: addr})
		replicas, rerr := s.Replicas(ctx, MasterName).Result()
		sentinels, serr := s.Sentinels(ctx, MasterName).Result()
		s.Close()
		if rerr != nil || serr != nil || len(replicas) < 1 || len(sentinels) < len(g.Sentinels)-1 {
			return false
		}
	}
	return true
}

// PrimaryAddr returns the primary's host:port as the first sentinel that answers says.
func (g *SentinelGroup) PrimaryAddr(ctx context.Context) (string, error) {
	var lastErr error
	for _, addr := range g.Sentinels {
		s := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		hostPort, err := s.GetMasterAddrByName(ctx, MasterName).Result()
		s.Close()
		if err == nil && len(hostPort) == 2 {
			return net.JoinHostPort(hostPort[0], hostPort[1]), nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("redisserver: no sentinel names the primary: %w", lastErr)
}

// Client returns a client that finds the primary through the sentinels and follows its
// failovers, closed when the test ends.
func (g *SentinelGroup) Client(t testing.TB) redis.UniversalClient {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: g.Sentinels})
	t.Cleanup(func() { c.Close() })
	return c
}

// WithoutCommand disables a command, as a managed Redis may (CONFIG, DEBUG): the server answers
// it as unknown.
func WithoutCommand(name string) Option {
	return func(s *settings) { s.args = append(s.args, "--rename-command", name, `""`) }
}

// MaxMemoryPolicy sets the server's maxmemory-policy (noeviction, allkeys-lru, ...).
func MaxMemoryPolicy(policy string) Option {
	return func(s *settings) { s.args = append(s.args, "--maxmemory-policy", policy) }
}
