package overhead

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
	"github.com/sluicehq/sluice/cmd/lab/internal/ladder"
)

// Options configure a run. Start from DefaultOptions: in the zero Options
// every count is zero, which Run refuses.
type Options struct {
	// Rates are the requests a second of each step, increasing; the checks are
	// made at the last. Each must be positive.
	Rates []int
	// Step is how long each target takes each rate in each round; must be
	// positive.
	Step time.Duration
	// Rounds is how many times every rate runs against every target; must
	// be positive.
	Rounds int
	// Warmup is the step, at the lowest rate, that each target takes
	// before the rounds and that is not counted. Zero means none.
	Warmup time.Duration
	// Workers caps the requests in flight, and so the connections, to each
	// target; must be positive.
	Workers int
	// Gateway is the path of the gateway binary.
	Gateway string
	// Pin runs the load and the stub on CPU 0 and the target measured on
	// CPU 1, when the machine has both: each process on its core, the way
	// a gateway pod limited to one CPU runs (with GOMAXPROCS 1), and the
	// targets' CPU times free of each other's and the load's scheduling.
	Pin bool
	// Tracing are the shares of calls, each above 0 and at most 1, at which
	// a gateway that traces its calls is measured too, each a target of its
	// own after the untraced gateway (see tracedTarget). Nil measures the
	// untraced gateway alone.
	Tracing []float64
	// Shapes name the shapes of call sent (see the Shape constants), each in
	// steps of its own, in this order; at least one.
	Shapes []string
	// Connections, when above zero, adds to each round a closed-loop step
	// per shape and target after the rates: that many connections, each
	// sending its next call as soon as it has read the answer to the last,
	// for Step. The gateway's capacity is its calls a second there against
	// the bare proxy's.
	Connections int
	// Stores are where the measured gateways keep their limits: "memory",
	// "redis" or both; a gateway per store, the one in Redis the target
	// GatewayRedis, with a redis-server of the run's own. The untraced
	// gateway in memory is always measured.
	Stores []string
	// RedisServer is the redis-server binary started for the store
	// "redis".
	RedisServer string
	// Soak, when above zero, sends the first of Shapes to the gateway that
	// keeps its limits in memory after the rounds, open-loop for that long:
	// at 80% of the calls a second it served on the closed loop, or at the
	// highest of Rates without one. Its resident memory, heap in use and
	// goroutines are sampled after each window of 5 s at most, six windows
	// at least. At most an hour.
	Soak time.Duration
	// Self is the path of a binary whose command ProxyCommand serves the
	// bare proxy (see RunProxy). Empty means this program.
	Self string
}

// The stores a gateway may keep its limits in.
const (
	storeMemory = "memory"
	storeRedis  = "redis"
)

// DefaultOptions is the reference run: short chats at 500 and 2,000
// requests a second, 10 s per step, 3 rounds after a 2 s warm-up, at most
// 128 requests in flight per target, no closed loop, the limits in memory,
// pinned, the gateway at bin/gateway.
func DefaultOptions() Options {
	return Options{
		Rates:       []int{500, 2000},
		Step:        10 * time.Second,
		Rounds:      3,
		Warmup:      2 * time.Second,
		Workers:     128,
		Pin:         true,
		Gateway:     gatewayproc.DefaultBinary,
		Shapes:      []string{ShapeChat},
		Stores:      []string{storeMemory},
		RedisServer: gatewayproc.DefaultRedisServer,
	}
}

// AddFlags registers a flag for every field of o but Self on fs, with o's
// values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.Var((*ladder.Ladder)(&o.Rates), "rates", "comma-separated requests per second, increasing; the checks are made at the last")
	fs.DurationVar(&o.Step, "step", o.Step, "how long each target takes each rate in each round")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "how many times every rate runs against every target")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "an uncounted step per target, at the lowest rate, before the rounds; 0 for none")
	fs.IntVar(&o.Workers, "workers", o.Workers, "the most requests in flight, and connections, to each target")
	fs.BoolVar(&o.Pin, "pin", o.Pin, "run the load on CPU 0 and the target measured on CPU 1, when the machine has both")
	fs.Var((*shares)(&o.Tracing), "tracing", "comma-separated shares of calls, from 0 to 1, at which a gateway that traces them is measured too, such as 0.01,1; empty for none")
	fs.Var((*names)(&o.Shapes), "shapes", "comma-separated shapes of call: chat, chat-uncapped, stream, embeddings, long-prompt")
	fs.IntVar(&o.Connections, "connections", o.Connections, "connections of a closed-loop step per shape and target in each round, after the rates; 0 for none")
	fs.Var((*names)(&o.Stores), "stores", "comma-separated stores of the gateways' limits: memory, redis")
	fs.StringVar(&o.RedisServer, "redis-server", o.RedisServer, "the redis-server binary, for the store redis")
	fs.DurationVar(&o.Soak, "soak", o.Soak, "after the rounds, send the first shape to the gateway in memory, open-loop at 80% of its closed-loop calls a second (or the highest rate), this long, sampling its memory; 0 for none")
	gatewayproc.AddFlag(fs, &o.Gateway, "path of the gateway binary")
}

// validate reports the first option Run cannot run with.
func (o Options) validate() error {
	switch {
	case !ladder.Ladder(o.Rates).Increasing():
		return errors.New("overhead: options: Rates must be positive and increasing")
	case o.Step <= 0 || o.Warmup < 0:
		return errors.New("overhead: options: Step must be positive and Warmup not negative")
	case o.Rounds <= 0 || o.Workers <= 0:
		return errors.New("overhead: options: Rounds and Workers must be positive")
	case slices.ContainsFunc(o.Tracing, func(s float64) bool { return !(s > 0 && s <= 1) }):
		return errors.New("overhead: options: each share of Tracing must be above 0 and at most 1")
	case len(slices.Compact(slices.Sorted(slices.Values(o.Tracing)))) != len(o.Tracing):
		return errors.New("overhead: options: the shares of Tracing must differ")
	case len(o.Shapes) == 0 || o.Connections < 0:
		return errors.New("overhead: options: Shapes must name one at least, and Connections must not be negative")
	case slices.ContainsFunc(o.Stores, func(s string) bool { return s != storeMemory && s != storeRedis }):
		return errors.New("overhead: options: each of Stores must be memory or redis")
	case o.Soak < 0 || o.Soak > maxSoak:
		return fmt.Errorf("overhead: options: Soak must be from 0 to %s", maxSoak)
	}
	for _, name := range o.Shapes {
		if _, err := shapeNamed(name); err != nil {
			return err
		}
	}
	return nil
}

// shapes are the shapes Shapes names; validate has checked them.
func (o Options) shapes() []Shape {
	out := make([]Shape, len(o.Shapes))
	for i, name := range o.Shapes {
		out[i], _ = shapeNamed(name)
	}
	return out
}

// loads are a round's loads: each rate, then the closed loop if any.
func (o Options) loads() []load {
	out := make([]load, 0, len(o.Rates)+1)
	for _, rate := range o.Rates {
		out = append(out, load{Rate: rate, Workers: o.Workers})
	}
	if o.Connections > 0 {
		out = append(out, load{Connections: o.Connections})
	}
	return out
}

// redis is whether a gateway keeps its limits in Redis.
func (o Options) redis() bool { return slices.Contains(o.Stores, storeRedis) }

// targets are the run's targets, in the order each round runs them: the stub, the proxy, the
// gateway, the gateway in Redis if asked, then the gateway traced at each share of Tracing.
func (o Options) targets() []Target {
	out := []Target{Stub, Proxy, Gateway}
	if o.redis() {
		out = append(out, GatewayRedis)
	}
	for _, share := range o.Tracing {
		out = append(out, tracedTarget(share))
	}
	return out
}

// shares are the shares of Options.Tracing. As a flag.Value it reads and writes the
// comma-separated form; an empty string is none.
type shares []float64

// String is the comma-separated form.
func (s *shares) String() string {
	out := make([]string, len(*s))
	for i, share := range *s {
		out[i] = strconv.FormatFloat(share, 'f', -1, 64)
	}
	return strings.Join(out, ",")
}

// Set replaces the shares with those of the comma-separated list v.
func (s *shares) Set(v string) error {
	var out shares
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		share, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("overhead: %q is not a share", f)
		}
		out = append(out, share)
	}
	*s = out
	return nil
}

// peak is the highest rate: the checks' rate.
func (o Options) peak() int { return o.Rates[len(o.Rates)-1] }

// closedLoopCeiling bounds the calls a second any target serves on closed
// loop, on one core.
const closedLoopCeiling = 100_000

// sizing is the calls a second the gateway's limits are sized for: the
// highest rate, or what a closed loop may reach.
func (o Options) sizing() int {
	if o.Connections > 0 {
		return max(o.peak(), closedLoopCeiling)
	}
	return o.peak()
}

// connections are the most connections a client of a target opens.
func (o Options) connections() int { return max(o.Workers, o.Connections) }

// names are a flag's comma-separated names, such as Options.Shapes.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

// Set replaces the names with those of the comma-separated list v.
func (n *names) Set(v string) error {
	var out names
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*n = out
	return nil
}
