package inference

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Options configure a simulated inference server. Start from
// DefaultOptions: New refuses the zero Options.
type Options struct {
	// Model is the one model served, by name (vLLM's --served-model-name).
	Model string
	// Engine is the engine whose metric names /metrics uses.
	Engine Engine
	// GPUs is how many GPUs the server has; must be positive.
	GPUs int
	// MaxNumSeqs is how many sequences run at once on each GPU (vLLM's
	// --max-num-seqs); must be positive.
	MaxNumSeqs int
	// TokenLatency is the time a token takes with an almost empty batch; a
	// full batch takes twice as long. Must be positive.
	TokenLatency time.Duration
	// DefaultMaxTokens is the completion's length when a request sets
	// neither max_tokens nor max_completion_tokens; must be positive.
	DefaultMaxTokens int64
}

// DefaultOptions is one GPU of vLLM serving meta-llama/Llama-3.1-8B-Instruct
// with vLLM's default of 256 sequences, 20 ms a token, and 200 completion
// tokens by default.
func DefaultOptions() Options {
	return Options{
		Model:            "meta-llama/Llama-3.1-8B-Instruct",
		Engine:           VLLM,
		GPUs:             1,
		MaxNumSeqs:       256,
		TokenLatency:     20 * time.Millisecond,
		DefaultMaxTokens: 200,
	}
}

// capacity is how many sequences run at once.
func (o Options) capacity() int { return o.GPUs * o.MaxNumSeqs }

func (o Options) validate() error {
	if _, ok := engines[o.Engine]; !ok {
		return fmt.Errorf("inference: options: Engine %q must be one of %s", o.Engine, engineList())
	}
	switch {
	case o.Model == "":
		return errors.New("inference: options: Model must not be empty")
	case o.GPUs <= 0, o.MaxNumSeqs <= 0:
		return errors.New("inference: options: GPUs and MaxNumSeqs must be positive")
	case o.TokenLatency <= 0:
		return errors.New("inference: options: TokenLatency must be positive")
	case o.DefaultMaxTokens <= 0:
		return errors.New("inference: options: DefaultMaxTokens must be positive")
	}
	return nil
}

// AddFlags registers a flag for every field of o on fs, with o's values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, "the model served")
	fs.Func("engine", "whose metric names to expose: "+engineList()+" (default "+string(o.Engine)+")", func(s string) error {
		if _, ok := engines[Engine(s)]; !ok {
			return fmt.Errorf("inference: engine %q: must be one of %s", s, engineList())
		}
		o.Engine = Engine(s)
		return nil
	})
	fs.IntVar(&o.GPUs, "gpus", o.GPUs, "GPUs of the server")
	fs.IntVar(&o.MaxNumSeqs, "max-num-seqs", o.MaxNumSeqs, "sequences run at once per GPU; more wait in the queue")
	fs.DurationVar(&o.TokenLatency, "token-latency", o.TokenLatency, "time a token takes with an almost empty batch (twice that with a full one)")
	fs.Int64Var(&o.DefaultMaxTokens, "default-max-tokens", o.DefaultMaxTokens, "completion tokens when a request sets no max_tokens")
}

// engineList is the engines' names, sorted and comma-separated.
func engineList() string {
	var names []string
	for e := range engines {
		names = append(names, string(e))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
