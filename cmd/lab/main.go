// Command lab runs the lab's simulators, a hosted model provider with a real
// account's limits and a self-hosted inference server that batches like
// vLLM, each until SIGINT or SIGTERM, then shuts down gracefully; the load
// ramp, which runs its cases against the simulated provider and reports
// where each way of calling it breaks; and the overhead measurement, which
// reports what the gateway adds to a call over a bare reverse proxy.
//
// Usage:
//
//	lab provider [flags]    # see package provider
//	lab inference [flags]   # see package inference
//	lab ramp [flags]        # see package ramp
//	lab overhead [flags]    # see package overhead
//
// "lab <command> -h" lists a command's flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/inference"
	"github.com/sluicehq/sluice/cmd/lab/internal/overhead"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
	"github.com/sluicehq/sluice/cmd/lab/internal/ramp"
)

// shutdownTimeout bounds how long calls in progress may finish after a
// signal; a provider's call takes about 2 s.
const shutdownTimeout = 15 * time.Second

const usage = `usage: lab <command> [flags]

commands:
  provider   a simulated hosted model provider: OpenAI's API under an account's limits
  inference  a simulated self-hosted inference server: vLLM-style continuous batching
  ramp       the load ramp: where each way of calling a provider breaks
  overhead   what the gateway adds to a call, against a bare reverse proxy

Run "lab <command> -h" for a command's flags.
`

// cli is where a command reports: results on stdout, flag errors, help and
// progress on stderr, logs through log.
type cli struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

// command is the command called name, which runs with its arguments until
// it is done or ctx is; nil if there is none.
func (c cli) command(name string) func(ctx context.Context, args []string) error {
	switch name {
	case "provider":
		return c.provider
	case "inference":
		return c.inference
	case "ramp":
		return c.ramp
	case "overhead":
		return c.overhead
	case overhead.ProxyCommand:
		return c.overheadProxy
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command args name and returns the exit code: 2 for bad
// usage, 1 for a failure.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]) {
		fmt.Fprint(stderr, usage)
		return 0
	}
	c := cli{stdout: os.Stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, nil)).With("simulator", args[0])}
	cmd := c.command(args[0])
	if cmd == nil {
		fmt.Fprint(stderr, usage)
		return 2
	}
	err := cmd(ctx, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		return 2
	case err != nil:
		c.log.Error("failed", "err", err)
		return 1
	}
	return 0
}

// usageError is bad flags, which the FlagSet has already reported.
type usageError struct{ err error }

// Error is the FlagSet's error.
func (e usageError) Error() string { return e.err.Error() }

// parse parses args into fs, which reports its own errors.
func parse(fs *flag.FlagSet, args []string) error {
	switch err := fs.Parse(args); {
	case err == nil:
		if fs.NArg() > 0 {
			fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
			return usageError{fmt.Errorf("lab: unexpected argument %q", fs.Arg(0))}
		}
		return nil
	case errors.Is(err, flag.ErrHelp):
		return err
	default:
		return usageError{err}
	}
}

// flags is a command's FlagSet, reporting to stderr.
func (c cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("lab "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

func (c cli) provider(ctx context.Context, args []string) error {
	fs := c.flags("provider")
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on (the example gateway configuration calls 127.0.0.1:8081)")
	opts := provider.DefaultOptions()
	opts.AddFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	p, err := provider.New(opts)
	if err != nil {
		return err
	}
	c.log.Info("account", "api", cmp.Or(opts.API, provider.APIOpenAI), "requestsPerMinute", opts.RequestsPerMinute, "tokensPerMinute", opts.TokensPerMinute,
		"maxInFlight", opts.MaxInFlight, "latency", opts.Latency, "models", opts.Models, "apiKey", opts.APIKey != "")
	// Background responses stop as the server shuts down, so that the
	// streams following them end and the shutdown need not wait for them.
	defer p.Close()
	context.AfterFunc(ctx, p.Close)
	return serve(ctx, *listen, p, c.log)
}

func (c cli) inference(ctx context.Context, args []string) error {
	fs := c.flags("inference")
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve on; one loopback address per Pod, such as 127.0.0.5:8000")
	opts := inference.DefaultOptions()
	opts.AddFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := inference.New(opts)
	if err != nil {
		return err
	}
	// The batch keeps running until the server has shut down, so the
	// requests in progress finish.
	batch, stop := context.WithCancel(context.Background())
	defer stop()
	go s.Run(batch)
	c.log.Info("engine", "engine", opts.Engine, "model", opts.Model, "gpus", opts.GPUs,
		"maxNumSeqs", opts.MaxNumSeqs, "tokenLatency", opts.TokenLatency)
	return serve(ctx, *listen, s, c.log)
}

// ramp runs the load ramp, with its progress on stderr, and writes its
// report: the table on stdout, report.json and the charts into --out. A ramp
// interrupted by a signal still reports the cases it ran.
func (c cli) ramp(ctx context.Context, args []string) error {
	fs := c.flags("ramp")
	out := fs.String("out", "ramp-report", "directory for report.json and a chart of each case, <case>.png")
	opts := ramp.DefaultOptions()
	opts.AddFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	rep, err := ramp.Run(ctx, opts, c.stderr)
	if len(rep.Cases) == 0 {
		return err
	}
	if err := rep.WriteTable(c.stdout); err != nil {
		return err
	}
	if err := rep.WriteFiles(*out); err != nil {
		return err
	}
	c.log.Info("report written", "dir", *out)
	return err
}

// overhead measures what the gateway adds to a call, with its progress on
// stderr, and writes its report: the table on stdout and the JSON into
// --out. A run interrupted by a signal still reports the steps it ran.
func (c cli) overhead(ctx context.Context, args []string) error {
	fs := c.flags("overhead")
	out := fs.String("out", "overhead.json", "file for the JSON report")
	opts := overhead.DefaultOptions()
	opts.AddFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	rep, err := overhead.Run(ctx, opts, c.stderr)
	if len(rep.Steps) == 0 {
		return err
	}
	if err := rep.WriteTable(c.stdout); err != nil {
		return err
	}
	if err := rep.WriteFile(*out); err != nil {
		return err
	}
	c.log.Info("report written", "file", *out)
	return err
}

// overheadProxy is the bare proxy that overhead starts in a process of its
// own; it stops when its stdin closes.
func (c cli) overheadProxy(ctx context.Context, args []string) error {
	return overhead.RunProxy(ctx, args, os.Stdin, c.stdout)
}

// serve serves h on addr until ctx is done, then shuts down, letting the
// requests in progress finish for up to shutdownTimeout.
func serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("lab: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-served:
		return fmt.Errorf("lab: serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
		return fmt.Errorf("lab: shut down: %w", err)
	}
	return nil
}
