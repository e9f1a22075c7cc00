package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterPrimaries is how many primaries StartCluster starts: the fewest Redis Cluster accepts.
const clusterPrimaries = 3

// clusterReadyWait bounds the wait for a new cluster to agree on its slots; it took about 3 s on
// the machines the project runs on.
const clusterReadyWait = 30 * time.Second

// Cluster is a Redis Cluster of three primaries without replicas, on loopback, owned by one test.
// Its nodes stop when the test ends.
type Cluster struct {
	// Addrs are the primaries' host:port on 127.0.0.1.
	Addrs []string
	nodes []*Server
}

// StartCluster starts three redis-servers in cluster mode, each in a directory of its own and
// with a cluster bus port of its own, joins them into a cluster with `redis-cli --cluster create`
// (every slot on a primary, no replicas), and waits until every node reports cluster_state:ok.
// opts apply to every node. Under -short the test is skipped.
func StartCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("redisserver: needs redis-server; skipped with -short")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redisserver: redis-cli is not installed: run `make test`, which installs it, or `apt-get install redis-tools`")
	}
	opts = append(opts[:len(opts):len(opts)], func(s *settings) { s.cluster = true })
	c := &Cluster{}
	for range clusterPrimaries {
		node := Start(t, opts...)
		c.nodes, c.Addrs = append(c.nodes, node), append(c.Addrs, node.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyWait)
	defer cancel()
	create := append([]string{"--cluster", "create"}, c.Addrs...)
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput(); err != nil {
		t.Fatalf("redisserver: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitReady(ctx); err != nil {
		t.Fatalf("redisserver: cluster on %v: %v", c.Addrs, err)
	}
	return c
}

// clusterArgs appends to a node's arguments those of cluster mode, with a free cluster bus port.
// The nodes' configuration file, nodes.conf, goes into the node's own directory (--dir).
func clusterArgs(args []string) ([]string, error) {
	bus, err := freePort()
	if err != nil {
		return nil, err
	}
	return append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus)), nil
}

// waitReady waits until every node reports cluster_state:ok and knows every primary.
func (c *Cluster) waitReady(ctx context.Context) error {
	for _, node := range c.nodes {
		client := node.client(redis.Options{MaxRetries: -1})
		err := waitClusterOK(ctx, client)
		client.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Addr, err)
		}
	}
	return nil
}

func waitClusterOK(ctx context.Context, client *redis.Client) error {
	var last string
	for {
		info, err := client.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterPrimaries)) {
			return nil
		}
		last = fmt.Sprint(info, err)
		select {
		case <-ctx.Done():
			return errors.New("not ready: " + last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Client returns a cluster client of the cluster, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	return c.ClientWith(t, redis.ClusterOptions{})
}

// ClientWith returns a cluster client of the cluster with opts (its addresses set to the
// cluster's), closed when the test ends.
func (c *Cluster) ClientWith(t testing.TB, opts redis.ClusterOptions) *redis.ClusterClient {
	opts.Addrs = c.Addrs
	client := redis.NewClusterClient(&opts)
	t.Cleanup(func() { client.Close() })
	return client
}

// Nodes returns the cluster's nodes, to reach one directly (a client of one node answers MOVED
// for the slots of the others).
func (c *Cluster) Nodes() []*Server { return c.nodes }
