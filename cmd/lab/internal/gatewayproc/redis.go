package gatewayproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisServer is the redis-server the lab starts when several gateways share their limits,
// looked up on PATH.
const DefaultRedisServer = "redis-server"

// Redis is a redis-server of the lab's own, for gateways that share their limits: on a free
// loopback port, keeping nothing on disk, in a temporary directory. Its methods are safe for
// concurrent use.
type Redis struct {
	// Addr is its host:port.
	Addr string

	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

// StartRedis starts the redis-server binary bin and waits until it answers PING.
func StartRedis(ctx context.Context, bin string) (*Redis, error) {
	dir, err := os.MkdirTemp("", "lab-redis-")
	if err != nil {
		return nil, fmt.Errorf("gatewayproc: redis directory: %w", err)
	}
	addr, _, err := freeAddrs()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("gatewayproc: start %s (install redis-server, or name it with --redis-server): %w", bin, err)
	}
	r := &Redis{Addr: addr, cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.exited)
	}()
	if err := r.waitReady(ctx); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// waitReady pings the server until it answers, it exits, ctx ends or readyTimeout passes.
func (r *Redis) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer func() { _ = client.Close() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for client.Ping(ctx).Err() != nil {
		select {
		case <-r.exited:
			return fmt.Errorf("gatewayproc: redis-server exited before it answered on %s", r.Addr)
		case <-ctx.Done():
			return fmt.Errorf("gatewayproc: redis-server did not answer on %s in time: %w", r.Addr, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// Stop sends the server SIGTERM, kills it if it has not exited after stopTimeout, and removes its
// directory.
func (r *Redis) Stop() {
	Terminate(r.cmd, r.exited)
	_ = os.RemoveAll(r.dir)
}
