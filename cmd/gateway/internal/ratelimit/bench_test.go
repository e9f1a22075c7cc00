package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/redisserver"
)

// fiveLevels is a request's checks at every level, keyed as the gateway keys them: a user's
// daily quota, a tenant's tokens per minute and an endpoint's requests per minute under the
// tenant's hash tag, the global requests per minute under its own and the provider's tokens per
// minute, a rolling window as the gateway builds it, under the provider's, with capacities no
// benchmark exhausts.
func fiveLevels(b *testing.B) []Check {
	const huge = 1 << 50
	limits := []*Limit{
		mustLimit(NewWindow("{tenant:acme}:user:alice:requests:day", LevelUser, Requests, huge, Calendar{Period: Day})),
		mustLimit(NewBucket("{tenant:acme}:tenant:tokens:minute", LevelTenant, Tokens, 1_000_000, time.Second, huge)),
		mustLimit(NewBucket("{tenant:acme}:endpoint:chat:requests:minute", LevelEndpoint, Requests, 1_000_000, time.Second, huge)),
		mustLimit(NewBucket("{sluice:global}:requests:minute", LevelGlobal, Requests, 1_000_000, time.Second, huge)),
		mustLimit(NewRolling("{openai}:provider:tokens:minute", LevelProvider, Tokens, gatewayv1.MaxRollingCapacity, time.Minute, gatewayv1.ProviderMinuteSlots)),
	}
	checks := make([]Check, len(limits))
	for i, l := range limits {
		checks[i] = Check{Limit: l, Cost: 1}
	}
	checks[1].Cost, checks[4].Cost = 800, 800
	return checks
}

// withMark is checks, the first levels of fiveLevels, with the mark of the tenant's calendar
// windows, as the gateway sends a decision on a user's daily quota (see NewMark), seeded in s.
func withMark(b *testing.B, s interface {
	Reseed(context.Context, *Limit, int64, []Seed, time.Time) (bool, error)
}, checks []Check) []Check {
	mk := NewMark("{tenant:acme}:record", LevelTenant)
	if _, err := s.Reseed(context.Background(), mk, 1, nil, time.Now()); err != nil {
		b.Fatal(err)
	}
	return append(slices.Clip(checks), Check{Limit: mk, Cost: 1})
}

func BenchmarkDecideMemory(b *testing.B) {
	m, ctx := NewMemory(), context.Background()
	checks := withMark(b, m, fiveLevels(b))
	now := time.Now()
	var d Decision // one per call, as the gateway keeps it in the call's ticket
	b.ReportAllocs()
	for b.Loop() {
		if _ = m.Decide(ctx, checks, now, &d); !d.Allowed {
			b.Fatal("refused")
		}
	}
}

// BenchmarkXTimeRateAllowN is the yardstick for BenchmarkDecideMemory: one level of
// golang.org/x/time/rate.
func BenchmarkXTimeRateAllowN(b *testing.B) {
	l := rate.NewLimiter(1_000_000, 1<<50)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if !l.AllowN(now, 1) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkDecideRedis measures decisions per second from 8 concurrent callers, for levels 1 and 5
// (each with the mark of the tenant's calendar windows),
// beside BenchmarkEvalshaYardstick. redis-benchmark drives its 8 clients from one thread; -cpu 1
// runs the callers on one thread too, which on a small machine also leaves Redis its own core.
func BenchmarkDecideRedis(b *testing.B) {
	benchmarkDecide(b, redisserver.Start(b).Client(b))
}

// BenchmarkDecideRedisCluster is BenchmarkDecideRedis on a Redis Cluster of three primaries on
// the same machine: five levels lie in three slots (the tenant's, the global and the provider's),
// so each decision is three script runs, two of them on one primary.
func BenchmarkDecideRedisCluster(b *testing.B) {
	benchmarkDecide(b, redisserver.StartCluster(b).Client(b))
}

func benchmarkDecide(b *testing.B, client redis.UniversalClient) {
	for _, levels := range []int{1, 5} {
		b.Run(fmt.Sprintf("levels=%d", levels), func(b *testing.B) {
			r, ctx := NewRedis(client), context.Background()
			checks := withMark(b, r, fiveLevels(b)[:levels])
			b.SetParallelism(max(8/runtime.GOMAXPROCS(0), 1)) // RunParallel starts parallelism × GOMAXPROCS callers
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var d Decision
				for pb.Next() {
					if err := r.Decide(ctx, checks, time.Now(), &d); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkEvalshaYardstick is BenchmarkDecideRedis's yardstick: redis-benchmark running EVALSHA of
// a script that returns 1, from 8 clients, against a server started as BenchmarkDecideRedis's
// is. It reports redis-benchmark's own requests per second.
func BenchmarkEvalshaYardstick(b *testing.B) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark is not installed")
	}
	server := redisserver.Start(b)
	sha, err := server.Client(b).ScriptLoad(context.Background(), "return 1").Result()
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(server.Addr)
	b.ResetTimer()
	out, err := exec.Command(bin, "-h", host, "-p", port, "-c", "8", "-n", strconv.Itoa(max(b.N, 1000)), "-q", "EVALSHA", sha, "0").Output()
	if err != nil {
		b.Fatalf("redis-benchmark: %v", err)
	}
	// The last line reads "EVALSHA ...: 45085.66 requests per second, p50=0.095 msec".
	fields := strings.Fields(string(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\r')+1:]))
	for i, f := range fields {
		if f == "requests" && i > 0 {
			rps, err := strconv.ParseFloat(fields[i-1], 64)
			if err != nil {
				b.Fatalf("redis-benchmark said %q", out)
			}
			b.ReportMetric(rps, "requests/s")
			return
		}
	}
	b.Fatalf("redis-benchmark said %q", out)
}
