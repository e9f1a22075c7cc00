package provider

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// Options configure a simulated provider account. Start from
// DefaultOptions: in the zero Options every limit is zero, which New
// refuses.
type Options struct {
	// APIKey is the key callers must send as "Authorization: Bearer <key>".
	// Empty accepts every caller.
	APIKey string
	// Models are the models served; requests for others answer 400.
	Models []string
	// RequestsPerMinute is the account's limit on requests in any rolling
	// minute; must be positive.
	RequestsPerMinute int64
	// TokensPerMinute is the account's limit on prompt and completion
	// tokens in any rolling minute; must be positive.
	TokensPerMinute int64
	// MaxInFlight is how many calls may run at once; must be positive.
	MaxInFlight int64
	// InputMicrosPerMillion is the price of a million prompt tokens, in
	// micro-dollars ($3 is 3,000,000). Zero makes them free.
	InputMicrosPerMillion int64
	// OutputMicrosPerMillion is the price of a million completion tokens,
	// in micro-dollars. Zero makes them free.
	OutputMicrosPerMillion int64
	// Latency is the mean time a call takes, whatever its size. Zero
	// answers at once.
	Latency time.Duration
	// LatencyStdDev is the standard deviation of a call's time, drawn from
	// a normal distribution and clamped at zero. Zero makes every call take
	// exactly Latency.
	LatencyStdDev time.Duration
	// DefaultMaxTokens is the completion's length when a request sets
	// neither max_tokens nor max_completion_tokens; must be positive.
	DefaultMaxTokens int64
	// FileTokens is the input tokens a Responses call is billed for each
	// input_file part that names a file, by file_id or file_url: the file
	// the provider reads, which the body does not show. Zero makes files
	// free.
	FileTokens int64
	// ToolTokens is the input tokens a Responses call is billed for each of
	// its file_search, web_search and web_search_preview tools: what the
	// search finds. Zero makes searches free.
	ToolTokens int64
	// MaxStored is how many responses the provider keeps for later reads;
	// when it is full, the oldest is forgotten. Must be positive.
	MaxStored int
	// AzureAPIVersion, when set, makes the account an Azure OpenAI resource:
	// it serves each model at /openai/deployments/DEPLOYMENT/PATH, where
	// PATH is the OpenAI path after /v1, to calls that carry this
	// api-version and the key in an api-key header. Empty serves the OpenAI
	// API.
	AzureAPIVersion string
	// AzureDeployments maps each deployment an Azure account serves to its
	// model; each model of Models is also served by a deployment of its own
	// name. As Azure does, a deployment serves a call whatever model its
	// body names.
	AzureDeployments map[string]string
	// Clock tells the time for the rolling minute and the answers. Nil
	// means the real clock.
	Clock clock.PassiveClock
	// Sleep waits for d, the time a call takes, or until ctx is done, and
	// then returns ctx's error. Nil means a real timer. Tests inject one
	// that returns at once, or when the test says.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultOptions is the reference account of the lab: 1,500 requests and
// 300,000 tokens a minute, 200 calls in flight, $3 per million tokens in and
// out, about 2 s a call (15% standard deviation), 200 completion tokens by
// default, the models gpt-4o-mini, gpt-4o and text-embedding-3-small, and
// for the Responses API 50,000 tokens a file read, 5,000 a search and
// 100,000 responses kept.
func DefaultOptions() Options {
	return Options{
		Models:                 []string{"gpt-4o-mini", "gpt-4o", "text-embedding-3-small"},
		RequestsPerMinute:      1500,
		TokensPerMinute:        300_000,
		MaxInFlight:            200,
		InputMicrosPerMillion:  3_000_000,
		OutputMicrosPerMillion: 3_000_000,
		Latency:                2 * time.Second,
		LatencyStdDev:          300 * time.Millisecond,
		DefaultMaxTokens:       200,
		FileTokens:             50_000,
		ToolTokens:             5_000,
		MaxStored:              100_000,
	}
}

// validate reports the first option that New cannot run with.
func (o Options) validate() error {
	switch {
	case len(o.Models) == 0:
		return errors.New("provider: options: Models must name at least one model")
	case o.RequestsPerMinute <= 0, o.TokensPerMinute <= 0, o.MaxInFlight <= 0:
		return errors.New("provider: options: RequestsPerMinute, TokensPerMinute and MaxInFlight must be positive")
	case o.InputMicrosPerMillion < 0, o.OutputMicrosPerMillion < 0:
		return errors.New("provider: options: prices must not be negative")
	case o.Latency < 0, o.LatencyStdDev < 0:
		return errors.New("provider: options: Latency and LatencyStdDev must not be negative")
	case o.DefaultMaxTokens <= 0:
		return errors.New("provider: options: DefaultMaxTokens must be positive")
	case o.FileTokens < 0, o.ToolTokens < 0:
		return errors.New("provider: options: FileTokens and ToolTokens must not be negative")
	case o.MaxStored <= 0:
		return errors.New("provider: options: MaxStored must be positive")
	}
	return nil
}

// AddFlags registers a flag for every field of o but Clock and Sleep on fs,
// with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "the key callers must send as a bearer token; empty accepts every caller")
	fs.Func("models", "comma-separated models served (default "+strings.Join(o.Models, ",")+")", o.setModels)
	fs.Int64Var(&o.RequestsPerMinute, "requests-per-minute", o.RequestsPerMinute, "requests allowed in any rolling minute")
	fs.Int64Var(&o.TokensPerMinute, "tokens-per-minute", o.TokensPerMinute, "prompt and completion tokens allowed in any rolling minute")
	fs.Int64Var(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "calls allowed at once; more answer 503")
	fs.Func("input-price", "dollars per million prompt tokens, a decimal (default "+price(o.InputMicrosPerMillion)+")", dollars(&o.InputMicrosPerMillion))
	fs.Func("output-price", "dollars per million completion tokens, a decimal (default "+price(o.OutputMicrosPerMillion)+")", dollars(&o.OutputMicrosPerMillion))
	fs.DurationVar(&o.Latency, "latency", o.Latency, "mean time a call takes")
	fs.DurationVar(&o.LatencyStdDev, "latency-stddev", o.LatencyStdDev, "standard deviation of a call's time")
	fs.Int64Var(&o.DefaultMaxTokens, "default-max-tokens", o.DefaultMaxTokens, "completion tokens when a request sets no max_tokens")
	fs.Int64Var(&o.FileTokens, "file-tokens", o.FileTokens, "input tokens a Responses call is billed for each file it names (input_file with file_id or file_url)")
	fs.Int64Var(&o.ToolTokens, "tool-tokens", o.ToolTokens, "input tokens a Responses call is billed for each file_search or web_search tool")
	fs.IntVar(&o.MaxStored, "max-stored", o.MaxStored, "responses kept for later reads; the oldest is forgotten past it")
	fs.StringVar(&o.AzureAPIVersion, "azure-api-version", o.AzureAPIVersion, "serve as an Azure OpenAI resource that takes this api-version, such as 2024-10-21; empty serves the OpenAI API")
	fs.Func("azure-deployments", "comma-separated deployment=model pairs an Azure resource serves (default: each model as a deployment of its own name)", o.setDeployments)
}

func (o *Options) setDeployments(s string) error {
	o.AzureDeployments = map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		deployment, model, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || deployment == "" || model == "" {
			return fmt.Errorf("provider: azure-deployments: %q is not deployment=model", pair)
		}
		o.AzureDeployments[deployment] = model
	}
	return nil
}

func (o *Options) setModels(s string) error {
	o.Models = nil
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Models = append(o.Models, m)
		}
	}
	return nil
}

// dollars parses a decimal dollar amount, never through a float, into micros.
func dollars(micros *int64) func(string) error {
	return func(s string) error {
		n, err := gatewayv1.Money(s).MicroDollars()
		if err != nil {
			return fmt.Errorf("provider: price: %w", err)
		}
		*micros = n
		return nil
	}
}

func price(micros int64) string { return string(gatewayv1.MoneyFromMicro(micros)) }

// azureServes reports whether an Azure account has deployment: one of its
// deployments, or a model of its own name.
func (o *Options) azureServes(deployment string) bool {
	_, ok := o.AzureDeployments[deployment]
	return ok || slices.Contains(o.Models, deployment)
}
