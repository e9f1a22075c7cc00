package ramp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
)

// gatewayView is what a test checks of a gateway configuration.
type gatewayView struct {
	Global                             []gatewayv1.Limit
	BaseURL, APIKeyFile                string
	RequestsPerMinute, TokensPerMinute int64
	MaxInFlight                        int64
	Prices                             gatewayv1.Prices
	Tenants                            int
	PerUser                            []gatewayv1.Limit
	Keys                               []gatewayv1.Key
	MaxWait                            time.Duration
}

func viewOf(c *gatewayv1.Config) gatewayView {
	p, t := c.Providers[0], c.Tenants[0]
	return gatewayView{
		Global: c.Global, BaseURL: p.BaseURL, APIKeyFile: p.APIKeyFile,
		RequestsPerMinute: p.RequestsPerMinute, TokensPerMinute: p.TokensPerMinute, MaxInFlight: p.MaxInFlight,
		Prices: p.Prices, Tenants: len(c.Tenants), PerUser: t.PerUser, Keys: t.Keys, MaxWait: t.MaxWait.Duration,
	}
}

// defaulted is p as a loaded configuration holds it: each class's price set to the one it
// falls back to.
func defaulted(p gatewayv1.Prices) gatewayv1.Prices {
	pr := gatewayv1.Provider{Prices: p}
	pr.Default()
	return pr.Prices
}

func TestGatewayConfig(t *testing.T) {
	keys := []gatewayv1.Key{
		{SHA256: gatewayv1.HashKey(userKey(0)), User: "user-000"},
		{SHA256: gatewayv1.HashKey(userKey(1)), User: "user-001"},
		{SHA256: gatewayv1.HashKey(userKey(2)), User: "user-002"},
	}
	perUser := func(b gatewayv1.Behavior) []gatewayv1.Limit {
		return []gatewayv1.Limit{{Dimension: "requests", Amount: 2, Per: "second", Burst: 5, OnLimit: b}}
	}
	global := func(b gatewayv1.Behavior) []gatewayv1.Limit {
		return []gatewayv1.Limit{{Dimension: "requests", Amount: 1500, Per: "minute", Burst: 1500, OnLimit: b}}
	}
	tests := []struct {
		name     string
		behavior gatewayv1.Behavior
		apiKey   string
		want     func(dir string) gatewayView
	}{{
		name:     "reject: a bucket per user and the provider's requests per minute for all",
		behavior: gatewayv1.BehaviorReject,
		want: func(string) gatewayView {
			return gatewayView{Global: global("Reject"), BaseURL: "http://127.0.0.1:9/v1", Prices: defaulted(threeDollars),
				Tenants: 1, PerUser: perUser("Reject"), Keys: keys, MaxWait: time.Minute}
		},
	}, {
		name:     "queue: the same, queued, and the provider's budgets to drain on",
		behavior: gatewayv1.BehaviorQueue,
		apiKey:   "sk-lab",
		want: func(dir string) gatewayView {
			return gatewayView{Global: global("Queue"), BaseURL: "http://127.0.0.1:9/v1", APIKeyFile: filepath.Join(dir, "provider.key"),
				RequestsPerMinute: 1500, TokensPerMinute: 300_000, MaxInFlight: 200, Prices: defaulted(threeDollars),
				Tenants: 1, PerUser: perUser("Queue"), Keys: keys, MaxWait: time.Minute}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Provider.APIKey = tc.apiKey
			dir := t.TempDir()
			path, err := gatewayproc.WriteConfig(dir, gatewayConfig(opts, tc.behavior, "http://127.0.0.1:9", 3), gatewayFiles(tc.apiKey))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := gatewayv1.Load(path) // as the gateway reads it
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(viewOf(cfg), tc.want(dir)); diff != "" {
				t.Errorf("configuration mismatch (-got +want):\n%s", diff)
			}
			key, err := os.ReadFile(filepath.Join(dir, "provider.key"))
			if got := strings.TrimSpace(string(key)); got != tc.apiKey || (err != nil) != (tc.apiKey == "") {
				t.Errorf("provider.key holds %q (%v); want %q, and no file without a key", got, err, tc.apiKey)
			}
		})
	}
}

func TestWriteGatewayConfigRefusesWhatTheGatewayWould(t *testing.T) {
	opts := DefaultOptions()
	opts.UserRate = 0 // a bucket that never fills
	_, err := gatewayproc.WriteConfig(t.TempDir(), gatewayConfig(opts, gatewayv1.BehaviorReject, "http://127.0.0.1:9", 1), nil)
	if err == nil || !strings.Contains(err.Error(), "perUser[0].amount") {
		t.Errorf("WriteConfig with a rate of 0 = %v; want the gateway's validation error", err)
	}
}
