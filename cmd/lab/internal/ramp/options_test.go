package ramp

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/labtest"
)

func TestAddFlagsSetsEveryOption(t *testing.T) {
	got, err := labtest.ParseFlags(DefaultOptions(), "-users", "1, 3,9", "-step", "200ms", "-pages", "10", "-cases", "burst,sequential",
		"-latency", "50ms", "-max-in-flight", "14", "-gateway", "/tmp/gw",
		"-gateway-url", "http://127.0.0.1:8080/", "-gateway-url", "http://127.0.0.1:8090", "-provider-addr", "127.0.0.1:8081",
		"-gateways", "2", "-redis-server", "/tmp/redis-server", "-comebacks", "5", "-queue-cap", "7m",
		"-text", "code", "-long-prompt-tokens", "6000", "-long-max-tokens", "300", "-long-users", "0.25", "-huge-pages", "2", "-huge-prompt-tokens", "250000")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions()
	want.Users, want.Step, want.Pages, want.Cases, want.Gateway = []int{1, 3, 9}, 200*time.Millisecond, 10, []string{"burst", "sequential"}, "/tmp/gw"
	want.Provider.Latency, want.Provider.MaxInFlight = 50*time.Millisecond, 14
	want.GatewayURLs, want.ProviderAddr = []string{"http://127.0.0.1:8080", "http://127.0.0.1:8090"}, "127.0.0.1:8081"
	want.Gateways, want.RedisServer, want.Comebacks, want.QueueCap = 2, "/tmp/redis-server", 5, 7*time.Minute
	want.Text, want.LongPromptTokens, want.LongMaxTokens, want.LongUsers, want.HugePages, want.HugePromptTokens = TextCode, 6000, 300, 0.25, 2, 250_000
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("options mismatch (-got +want):\n%s", diff)
	}
}

func TestAddFlagsKeepsTheLoadOnLoopback(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:8080", "ftp://gw", "http://", "://x", "http://10.0.0.1:8080", "https://api.example.com"} {
		if _, err := labtest.ParseFlags(DefaultOptions(), "-gateway-url", bad); err == nil || !strings.Contains(err.Error(), "want a gateway's base URL") {
			t.Errorf("-gateway-url %q: err = %v; want a clear refusal", bad, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:8081", "8081", "example.com:80"} {
		if _, err := labtest.ParseFlags(DefaultOptions(), "-provider-addr", bad); err == nil || !strings.Contains(err.Error(), "want a loopback host:port") {
			t.Errorf("-provider-addr %q: err = %v; want a clear refusal", bad, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string // in the error; empty for none
	}{
		{name: "the defaults", change: func(*Options) {}},
		{name: "users that do not increase", change: func(o *Options) { o.Users = []int{1, 3, 3} }, want: "Users must be positive and increasing"},
		{name: "no users", change: func(o *Options) { o.Users = nil }, want: "Users must be positive and increasing"},
		{name: "zero users first", change: func(o *Options) { o.Users = []int{0, 1} }, want: "Users must be positive and increasing"},
		{name: "no step", change: func(o *Options) { o.Step = 0 }, want: "Step, Duration, QueueCap, FailoverAt and FailoverFor must be positive"},
		{name: "an empty book", change: func(o *Options) { o.Pages = 0 }, want: "Pages, PromptTokens and MaxTokens must be positive"},
		{name: "a door past 10 minutes", change: func(o *Options) { o.MaxWait = time.Hour }, want: "MaxWait must be more than 0s and at most 10m0s"},
		{name: "an unknown case", change: func(o *Options) { o.Cases = []string{"burst", "retry"} }, want: `unknown case "retry": must be one of sequential, burst, reject, queue, pool`},
		{name: "a case twice", change: func(o *Options) { o.Cases = []string{"burst", "burst"} }, want: `case "burst" is named twice`},
		{name: "no case", change: func(o *Options) { o.Cases = nil }, want: "Cases must name at least one case"},
		{name: "long pages for every other user", change: func(o *Options) { o.LongPromptTokens, o.LongMaxTokens = 20_000, 400 }},
		{name: "a few pages near the provider's minute", change: func(o *Options) { o.HugePages, o.HugePromptTokens = 3, 299_800 }},
		{name: "a negative long page", change: func(o *Options) { o.LongPromptTokens = -1 },
			want: "LongPromptTokens, LongMaxTokens, HugePages and HugePromptTokens must not be negative"},
		{name: "no long users", change: func(o *Options) { o.LongPromptTokens, o.LongUsers = 6000, 0 }, want: "LongUsers must be more than 0 and at most 1"},
		{name: "more than every user long", change: func(o *Options) { o.LongUsers = 1.5 }, want: "LongUsers must be more than 0 and at most 1"},
		{name: "a long max_tokens without long pages", change: func(o *Options) { o.LongMaxTokens = 400 }, want: "LongMaxTokens must be 0 without LongPromptTokens"},
		{name: "huge pages of no size", change: func(o *Options) { o.HugePages = 2 }, want: "HugePages and HugePromptTokens must be set together"},
		{name: "a huge size for no page", change: func(o *Options) { o.HugePromptTokens = 250_000 }, want: "HugePages and HugePromptTokens must be set together"},
		{name: "more huge pages than pages", change: func(o *Options) { o.Users, o.Pages, o.HugePages, o.HugePromptTokens = []int{1, 2}, 3, 7, 1000 },
			want: "HugePages must be at most the crowd's 6 pages"},
		{name: "a huge page past the provider's minute", change: func(o *Options) { o.HugePages, o.HugePromptTokens = 1, 299_801 },
			want: "every page must fit in the provider's 300000 TokensPerMinute: the largest counts 300001"},
		{name: "a long page spread past the provider's minute", change: func(o *Options) { o.LongPromptTokens, o.SizeSpread = 250_000, 0.5 },
			want: "every page must fit in the provider's 300000 TokensPerMinute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			tc.change(&opts)
			err := opts.validate()
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate() = %v; want %q", err, tc.want)
			}
		})
	}
}
