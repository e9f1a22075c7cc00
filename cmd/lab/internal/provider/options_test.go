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
