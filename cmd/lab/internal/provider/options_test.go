package provider

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAddFlagsSetsTheClassesAndLimits(t *testing.T) {
	got := DefaultOptions()
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	got.AddFlags(fs)
	err := fs.Parse([]string{
		"-input-tokens-per-minute", "40000", "-output-tokens-per-minute", "8000", "-cached-counts-as-input",
		"-requests-per-day", "250", "-day-time-zone", "Europe/Paris",
		"-input-price", "1.25", "-cached-input-price", "0.125", "-audio-input-price", "32", "-output-price", "10", "-audio-output-price", "64",
		"-priority-multiplier", "1.75", "-flex-multiplier", "0.5",
		"-cache-ttl", "1h", "-max-cached-prefixes", "5000", "-reasoning-models", "o3, lab-think", "-reasoning-tokens", "64",
		"-answer-tokens", "120", "-audio-tokens-per-part", "300",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions()
	want.InputTokensPerMinute, want.OutputTokensPerMinute, want.CachedCountsAsInput = 40_000, 8000, true
	want.RequestsPerDay, want.DayTimeZone = 250, "Europe/Paris"
	want.InputMicrosPerMillion, want.CachedInputMicrosPerMillion, want.AudioInputMicrosPerMillion = 1_250_000, 125_000, 32_000_000
	want.OutputMicrosPerMillion, want.AudioOutputMicrosPerMillion = 10_000_000, 64_000_000
	want.PriorityMultiplier, want.FlexMultiplier = 1.75, 0.5
	want.CacheTTL, want.MaxCachedPrefixes, want.ReasoningModels, want.ReasoningTokens = time.Hour, 5000, []string{"o3", "lab-think"}, 64
	want.AnswerTokens, want.AudioTokensPerPart = 120, 300
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("options mismatch (-got +want):\n%s", diff)
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"a negative limit apart", func(o *Options) { o.OutputTokensPerMinute = -1 }, "must not be negative"},
		{"a time zone that is not one", func(o *Options) { o.DayTimeZone = "Mars/Olympus" }, "DayTimeZone"},
		{"a negative price", func(o *Options) { o.AudioOutputMicrosPerMillion = -1 }, "prices must not be negative"},
		{"a zero multiplier", func(o *Options) { o.FlexMultiplier = 0 }, "FlexMultiplier must be at least 0.000001"},
		{"a multiplier that rounds to zero", func(o *Options) { o.PriorityMultiplier = 1e-7 }, "must be at least 0.000001"},
		{"a cache with no room", func(o *Options) { o.MaxCachedPrefixes = 0 }, "MaxCachedPrefixes must be positive"},
		{"negative reasoning", func(o *Options) { o.ReasoningTokens = -1 }, "ReasoningTokens, AnswerTokens and AudioTokensPerPart must not be negative"},
		{"an API it does not speak", func(o *Options) { o.API = "gemini" }, `API "gemini"`},
		{"an Anthropic account on Azure", func(o *Options) { o.API, o.AzureAPIVersion = APIAnthropic, "2024-10-21" }, "cannot be an Azure resource"},
		{"an Anthropic account with no cache", func(o *Options) { o.API, o.CacheTTL, o.MaxCachedPrefixes = APIAnthropic, 0, 0 }, "MaxCachedPrefixes must be positive"},
		{"a negative cache write price", func(o *Options) { o.CacheWrite1hInputMicrosPerMillion = -1 }, "prices must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			tc.change(&opts)
			if _, err := New(opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v; want one saying %q", err, tc.want)
			}
		})
	}
	opts := DefaultOptions()
	opts.CacheTTL, opts.MaxCachedPrefixes = 0, 0
	if _, err := New(opts); err != nil {
		t.Errorf("New() with no cache: %v; want none", err)
	}
}

func TestAddFlagsServesAnthropic(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantModels []string
	}{
		{"its models", []string{"-api", "anthropic"}, anthropicModels},
		{"the models named after", []string{"-api", "anthropic", "-models", "claude-a"}, []string{"claude-a"}},
		{"the models named before", []string{"-models", "claude-a", "-api", "anthropic"}, []string{"claude-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DefaultOptions()
			fs := flag.NewFlagSet("provider", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			got.AddFlags(fs)
			args := append(tc.args, "-count-tokens-requests-per-minute", "100", "-cache-write-input-price", "3.75", "-cache-write-1h-input-price", "6")
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			want := DefaultOptions()
			want.API, want.Models, want.CountTokensRequestsPerMinute = APIAnthropic, tc.wantModels, 100
			want.CacheWriteInputMicrosPerMillion, want.CacheWrite1hInputMicrosPerMillion = 3_750_000, 6_000_000
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("options mismatch (-got +want):\n%s", diff)
			}
		})
	}
}
