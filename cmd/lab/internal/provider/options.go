package provider

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // DayTimeZone loads wherever the lab runs

	"k8s.io/utils/clock"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// Options configure a simulated provider account. Start from
// DefaultOptions: in the zero Options every limit is zero, which New
// refuses.
type Options struct {
	// API is the API the account serves: APIOpenAI (empty means it too) or
	// APIAnthropic. An Anthropic account serves Anthropic's Messages API
	// (see the package doc) and uses the options that say so.
	API string
	// APIKey is the key callers must send as "Authorization: Bearer <key>",
	// or as x-api-key to an Anthropic account. Empty accepts every caller.
	APIKey string
	// Models are the models served; requests for others answer 400 (404 on
	// an Anthropic account).
	Models []string
	// RequestsPerMinute is the account's limit on requests in any rolling
	// minute; must be positive.
	RequestsPerMinute int64
	// TokensPerMinute is the account's limit on prompt and completion
	// tokens in any rolling minute; must be positive. An Anthropic account,
	// which limits input and output tokens apart, does not use it.
	TokensPerMinute int64
	// MaxInFlight is how many calls may run at once; must be positive.
	MaxInFlight int64
	// InputTokensPerMinute is the account's limit on input tokens in any
	// rolling minute, as Anthropic and Gemini limit them: the prompt tokens
	// not read from the cache (all of them with CachedCountsAsInput).
	// Zero is no limit.
	InputTokensPerMinute int64
	// OutputTokensPerMinute is the account's limit on output tokens in any
	// rolling minute: a call counts its cap when it is admitted, and the
	// completion tokens it made (none if its client left) once it ends.
	// Zero is no limit.
	OutputTokensPerMinute int64
	// CachedCountsAsInput counts the prompt tokens read from the cache
	// towards InputTokensPerMinute, as Anthropic's older models did. False
	// counts only the others, as its current models do.
	CachedCountsAsInput bool
	// CountTokensRequestsPerMinute is an Anthropic account's limit on
	// count_tokens requests in any rolling minute, which Anthropic limits
	// apart from the Messages calls. Zero is no limit.
	CountTokensRequestsPerMinute int64
	// RequestsPerDay is the account's limit on requests in a day that
	// begins at midnight in DayTimeZone. Zero is no limit.
	RequestsPerDay int64
	// DayTimeZone is the IANA time zone, such as "Europe/Paris", whose
	// midnight begins the day of RequestsPerDay. Empty means
	// America/Los_Angeles, where Gemini's day begins.
	DayTimeZone string
	// InputMicrosPerMillion is the price of a million prompt tokens of
	// text not read from the cache, in micro-dollars ($3 is 3,000,000).
	// Zero makes them free.
	InputMicrosPerMillion int64
	// CachedInputMicrosPerMillion is the price of a million prompt tokens
	// read from the cache, in micro-dollars. Zero means a tenth of
	// InputMicrosPerMillion (rounded down), as OpenAI's recent models and
	// Anthropic's cache reads cost.
	CachedInputMicrosPerMillion int64
	// CacheWriteInputMicrosPerMillion is the price of a million input
	// tokens an Anthropic account writes to its cache for five minutes, in
	// micro-dollars. Zero means 1.25 times InputMicrosPerMillion (rounded
	// down), as Anthropic prices them.
	CacheWriteInputMicrosPerMillion int64
	// CacheWrite1hInputMicrosPerMillion is the price of a million input
	// tokens an Anthropic account writes to its cache for an hour, in
	// micro-dollars. Zero means twice InputMicrosPerMillion.
	CacheWrite1hInputMicrosPerMillion int64
	// AudioInputMicrosPerMillion is the price of a million audio prompt
	// tokens, in micro-dollars. Zero makes them free.
	AudioInputMicrosPerMillion int64
	// OutputMicrosPerMillion is the price of a million completion tokens
	// that are not audio, reasoning included, in micro-dollars. Zero makes
	// them free.
	OutputMicrosPerMillion int64
	// AudioOutputMicrosPerMillion is the price of a million audio
	// completion tokens, in micro-dollars. Zero makes them free.
	AudioOutputMicrosPerMillion int64
	// PriorityMultiplier multiplies the bill of a call served at the
	// priority tier, every class of its tokens; it is taken to six
	// decimal places and must be at least 0.000001.
	PriorityMultiplier float64
	// FlexMultiplier multiplies the bill of a call served at the flex tier,
	// as PriorityMultiplier does at priority.
	FlexMultiplier float64
	// CacheTTL is how long the account keeps a prompt's prefixes after the
	// last call whose prompt had them (see the package doc). Zero caches
	// nothing. An Anthropic account keeps each prefix as long as its
	// breakpoint asks, and does not use it.
	CacheTTL time.Duration
	// MaxCachedPrefixes is how many prefixes the account keeps: a prompt of
	// n tokens of text has one for 1,024 tokens and one more for each 128
	// after, and a prompt to an Anthropic account one for each breakpoint.
	// Past it, those that would expire soonest are forgotten. Must be
	// positive when CacheTTL is, and on an Anthropic account.
	MaxCachedPrefixes int
	// ReasoningModels are the beginnings of the names of the models that
	// reason, such as "o3" or "gpt-5". Nil means OpenAI's: names that begin
	// with "o" and a digit, or with "gpt-5".
	ReasoningModels []string
	// ReasoningTokens is how many completion tokens a reasoning model
	// reasons in a chat or a response before it answers, within the call's
	// cap, and how many a model of an Anthropic account thinks when the
	// request enables thinking, within its budget. Zero makes no model
	// reason.
	ReasoningTokens int64
	// AnswerTokens is how many tokens a model answers after it has
	// reasoned, when the call's cap leaves room for more. Zero answers up
	// to the cap, always.
	AnswerTokens int64
	// AudioTokensPerPart is the audio prompt tokens of each input_audio
	// part of a chat's messages. Zero counts none.
	AudioTokensPerPart int64
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
	// the provider reads, which the body does not show; and a Messages call
	// for each document it cannot read as text (a PDF, a URL or a file).
	// Zero makes files free.
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
	// BatchQueueTokens is how many tokens (each line's prompt and cap) the
	// account's batches in progress may hold enqueued for a model; a batch
	// that would pass it fails with token_limit_exceeded. 0 is no limit.
	BatchQueueTokens int64
	// BatchDelay is how long a batch is in progress before it completes.
	BatchDelay time.Duration
	// Clock tells the time for the rolling minute, the day, the cache and
	// the answers. Nil means the real clock.
	Clock clock.PassiveClock
	// Sleep waits for d, the time a call takes, or until ctx is done, and
	// then returns ctx's error. Nil means a real timer. Tests inject one
	// that returns at once, or when the test says.
	Sleep func(ctx context.Context, d time.Duration) error
}

// The APIs an account may serve.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// anthropicModels are the models an Anthropic account the lab starts
// serves unless told otherwise.
var anthropicModels = []string{"claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"}

// DefaultOptions is the reference account of the lab: 1,500 requests and
// 300,000 tokens a minute, no limit on input or output tokens apart or on
// requests a day, 200 calls in flight; $3 per million tokens in and out,
// $0.30 cached, $40 and $80 audio in and out, twice that at the priority
// tier and half at flex; prompts cached for 5 minutes, a million prefixes
// kept; 100 tokens of reasoning, 500 tokens an audio part; about 2 s a call
// (15% standard deviation), 200 completion tokens by default; the models
// gpt-4o-mini, gpt-4o and text-embedding-3-small; and for the Responses
// API 50,000 tokens a file read, 5,000 a search and 100,000 responses kept.
func DefaultOptions() Options {
	return Options{
		Models:                      []string{"gpt-4o-mini", "gpt-4o", "text-embedding-3-small"},
		RequestsPerMinute:           1500,
		TokensPerMinute:             300_000,
		MaxInFlight:                 200,
		InputMicrosPerMillion:       3_000_000,
		AudioInputMicrosPerMillion:  40_000_000,
		OutputMicrosPerMillion:      3_000_000,
		AudioOutputMicrosPerMillion: 80_000_000,
		PriorityMultiplier:          2,
		FlexMultiplier:              0.5,
		CacheTTL:                    5 * time.Minute,
		MaxCachedPrefixes:           1_000_000,
		ReasoningTokens:             100,
		AudioTokensPerPart:          500,
		Latency:                     2 * time.Second,
		LatencyStdDev:               300 * time.Millisecond,
		DefaultMaxTokens:            200,
		FileTokens:                  50_000,
		ToolTokens:                  5_000,
		MaxStored:                   100_000,
		BatchDelay:                  10 * time.Second,
	}
}

// validate reports the first option that New cannot run with.
func (o Options) validate() error {
	if err := o.validateAccount(); err != nil {
		return err
	}
	switch {
	case o.InputMicrosPerMillion < 0, o.CachedInputMicrosPerMillion < 0, o.AudioInputMicrosPerMillion < 0,
		o.OutputMicrosPerMillion < 0, o.AudioOutputMicrosPerMillion < 0,
		o.CacheWriteInputMicrosPerMillion < 0, o.CacheWrite1hInputMicrosPerMillion < 0:
		return errors.New("provider: options: prices must not be negative")
	case millionths(o.PriorityMultiplier) < 1, millionths(o.FlexMultiplier) < 1:
		return errors.New("provider: options: PriorityMultiplier and FlexMultiplier must be at least 0.000001")
	case o.CacheTTL < 0, (o.CacheTTL > 0 || o.API == APIAnthropic) && o.MaxCachedPrefixes <= 0:
		return errors.New("provider: options: CacheTTL must not be negative, and MaxCachedPrefixes must be positive when it is not zero or the account is Anthropic's")
	case o.ReasoningTokens < 0, o.AnswerTokens < 0, o.AudioTokensPerPart < 0:
		return errors.New("provider: options: ReasoningTokens, AnswerTokens and AudioTokensPerPart must not be negative")
	case o.BatchQueueTokens < 0, o.BatchDelay < 0:
		return errors.New("provider: options: BatchQueueTokens and BatchDelay must not be negative")
	}
	return o.validateCalls()
}

// validateAccount reports the first model or limit that New cannot run
// with.
func (o Options) validateAccount() error {
	switch {
	case o.API != "" && o.API != APIOpenAI && o.API != APIAnthropic:
		return fmt.Errorf("provider: options: API %q is neither %q nor %q", o.API, APIOpenAI, APIAnthropic)
	case o.API == APIAnthropic && o.AzureAPIVersion != "":
		return errors.New("provider: options: an Anthropic account cannot be an Azure resource")
	case len(o.Models) == 0:
		return errors.New("provider: options: Models must name at least one model")
	case o.RequestsPerMinute <= 0, o.TokensPerMinute <= 0, o.MaxInFlight <= 0:
		return errors.New("provider: options: RequestsPerMinute, TokensPerMinute and MaxInFlight must be positive")
	case o.InputTokensPerMinute < 0, o.OutputTokensPerMinute < 0, o.RequestsPerDay < 0, o.CountTokensRequestsPerMinute < 0:
		return errors.New("provider: options: InputTokensPerMinute, OutputTokensPerMinute, RequestsPerDay and CountTokensRequestsPerMinute must not be negative")
	}
	if _, err := o.dayZone(); err != nil {
		return err
	}
	return nil
}

// dayZone is the time zone of DayTimeZone.
func (o Options) dayZone() (*time.Location, error) {
	loc, err := time.LoadLocation(cmp.Or(o.DayTimeZone, "America/Los_Angeles"))
	if err != nil {
		return nil, fmt.Errorf("provider: options: DayTimeZone: %w", err)
	}
	return loc, nil
}

// validateCalls reports the first option of the calls' time, size or
// responses that New cannot run with.
func (o Options) validateCalls() error {
	switch {
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
//
// -api anthropic makes the account serve anthropicModels unless -models
// says otherwise, before or after it.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	modelsSet := false
	fs.Func("api", "the API the account serves: openai or anthropic (default openai)", func(s string) error {
		o.API = s
		if s == APIAnthropic && !modelsSet {
			o.Models = slices.Clone(anthropicModels)
		}
		return nil
	})
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "the key callers must send as a bearer token, or as x-api-key to an Anthropic account; empty accepts every caller")
	fs.Func("models", "comma-separated models served (default "+strings.Join(o.Models, ",")+", or with -api anthropic "+strings.Join(anthropicModels, ",")+")", func(s string) error {
		modelsSet = true
		return o.setModels(s)
	})
	o.addLimitFlags(fs)
	o.addPriceFlags(fs)
	o.addClassFlags(fs)
	fs.DurationVar(&o.Latency, "latency", o.Latency, "mean time a call takes")
	fs.DurationVar(&o.LatencyStdDev, "latency-stddev", o.LatencyStdDev, "standard deviation of a call's time")
	fs.Int64Var(&o.DefaultMaxTokens, "default-max-tokens", o.DefaultMaxTokens, "completion tokens when a request sets no max_tokens")
	fs.Int64Var(&o.BatchQueueTokens, "batch-queue-tokens", o.BatchQueueTokens, "tokens (prompts and caps) the account's batches in progress may hold enqueued for a model; a batch past it fails with token_limit_exceeded; 0 is no limit")
	fs.DurationVar(&o.BatchDelay, "batch-delay", o.BatchDelay, "how long a batch is in progress before it completes")
	fs.Int64Var(&o.FileTokens, "file-tokens", o.FileTokens, "input tokens a Responses call is billed for each file it names (input_file with file_id or file_url)")
	fs.Int64Var(&o.ToolTokens, "tool-tokens", o.ToolTokens, "input tokens a Responses call is billed for each file_search or web_search tool")
	fs.IntVar(&o.MaxStored, "max-stored", o.MaxStored, "responses kept for later reads; the oldest is forgotten past it")
	fs.StringVar(&o.AzureAPIVersion, "azure-api-version", o.AzureAPIVersion, "serve as an Azure OpenAI resource that takes this api-version, such as 2024-10-21; empty serves the OpenAI API")
	fs.Func("azure-deployments", "comma-separated deployment=model pairs an Azure resource serves (default: each model as a deployment of its own name)", o.setDeployments)
}

func (o *Options) addLimitFlags(fs *flag.FlagSet) {
	fs.Int64Var(&o.RequestsPerMinute, "requests-per-minute", o.RequestsPerMinute, "requests allowed in any rolling minute")
	fs.Int64Var(&o.TokensPerMinute, "tokens-per-minute", o.TokensPerMinute, "prompt and completion tokens allowed in any rolling minute")
	fs.Int64Var(&o.InputTokensPerMinute, "input-tokens-per-minute", o.InputTokensPerMinute, "input tokens (prompt tokens not read from the cache) allowed in any rolling minute; 0 is no limit")
	fs.Int64Var(&o.OutputTokensPerMinute, "output-tokens-per-minute", o.OutputTokensPerMinute, "output tokens allowed in any rolling minute, counted at the call's cap until it ends; 0 is no limit")
	fs.BoolVar(&o.CachedCountsAsInput, "cached-counts-as-input", o.CachedCountsAsInput, "count prompt tokens read from the cache towards input-tokens-per-minute")
	fs.Int64Var(&o.CountTokensRequestsPerMinute, "count-tokens-requests-per-minute", o.CountTokensRequestsPerMinute, "count_tokens requests an Anthropic account allows in any rolling minute, apart from its messages; 0 is no limit")
	fs.Int64Var(&o.RequestsPerDay, "requests-per-day", o.RequestsPerDay, "requests allowed in a day from midnight in day-time-zone; 0 is no limit")
	fs.StringVar(&o.DayTimeZone, "day-time-zone", o.DayTimeZone, "IANA time zone whose midnight begins the day of requests-per-day (default America/Los_Angeles)")
	fs.Int64Var(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "calls allowed at once; more answer 503 (529 on an Anthropic account)")
}

func (o *Options) addPriceFlags(fs *flag.FlagSet) {
	fs.Func("input-price", "dollars per million prompt tokens of text not read from the cache, a decimal (default "+price(o.InputMicrosPerMillion)+")", dollars(&o.InputMicrosPerMillion))
	fs.Func("cached-input-price", "dollars per million prompt tokens read from the cache, a decimal (default a tenth of input-price)", dollars(&o.CachedInputMicrosPerMillion))
	fs.Func("cache-write-input-price", "dollars per million input tokens an Anthropic account writes to its cache for five minutes, a decimal (default 1.25 times input-price)", dollars(&o.CacheWriteInputMicrosPerMillion))
	fs.Func("cache-write-1h-input-price", "dollars per million input tokens an Anthropic account writes to its cache for an hour, a decimal (default twice input-price)", dollars(&o.CacheWrite1hInputMicrosPerMillion))
	fs.Func("audio-input-price", "dollars per million audio prompt tokens, a decimal (default "+price(o.AudioInputMicrosPerMillion)+")", dollars(&o.AudioInputMicrosPerMillion))
	fs.Func("output-price", "dollars per million completion tokens that are not audio, a decimal (default "+price(o.OutputMicrosPerMillion)+")", dollars(&o.OutputMicrosPerMillion))
	fs.Func("audio-output-price", "dollars per million audio completion tokens, a decimal (default "+price(o.AudioOutputMicrosPerMillion)+")", dollars(&o.AudioOutputMicrosPerMillion))
	fs.Float64Var(&o.PriorityMultiplier, "priority-multiplier", o.PriorityMultiplier, "what a call served at the priority tier costs, times its price at the default tier")
	fs.Float64Var(&o.FlexMultiplier, "flex-multiplier", o.FlexMultiplier, "what a call served at the flex tier costs, times its price at the default tier")
}

func (o *Options) addClassFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.CacheTTL, "cache-ttl", o.CacheTTL, "how long a prompt's prefixes stay cached after the last call that had them; 0 caches nothing")
	fs.IntVar(&o.MaxCachedPrefixes, "max-cached-prefixes", o.MaxCachedPrefixes, "prefixes kept in the cache (one for 1,024 tokens and one for each 128 after); the least recently seen are forgotten past it")
	fs.Func("reasoning-models", "comma-separated beginnings of the names of the models that reason (default: o and a digit, or gpt-5)", o.setReasoningModels)
	fs.Int64Var(&o.ReasoningTokens, "reasoning-tokens", o.ReasoningTokens, "completion tokens a reasoning model reasons, within the call's cap")
	fs.Int64Var(&o.AnswerTokens, "answer-tokens", o.AnswerTokens, "tokens a model answers after reasoning when the cap leaves room; 0 answers up to the cap")
	fs.Int64Var(&o.AudioTokensPerPart, "audio-tokens-per-part", o.AudioTokensPerPart, "audio prompt tokens of each input_audio part of a chat")
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
	o.Models = names(s)
	return nil
}

func (o *Options) setReasoningModels(s string) error {
	o.ReasoningModels = names(s)
	if o.ReasoningModels == nil {
		o.ReasoningModels = []string{} // none, rather than OpenAI's
	}
	return nil
}

// names are the names of a comma-separated list, spaces trimmed and empty
// ones left out.
func names(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
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
