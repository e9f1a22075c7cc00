package v1

import "testing"

// TestProviderPaceSizes sizes the paces of a provider's per-minute limits: each refills at 59/61
// of the limit and bursts a second of it, tokens at least 4,096 (but no more than the limit).
func TestProviderPaceSizes(t *testing.T) {
	cases := []struct {
		name                string
		n, least            int64
		wantRate, wantBurst int64
	}{
		{"1,500 requests", 1500, 0, 1450, 25},
		{"300,000 tokens", 300_000, MinTokenBurst, 290_163, 5000},
		{"100,000 tokens", 100_000, MinTokenBurst, 96_721, 4096},
		{"3,000 tokens", 3000, MinTokenBurst, 2901, 3000},
		{"$0.50 in micro-dollars", 500_000, 0, 483_606, 8333},
		{"1 request", 1, 0, 1, 1},
	}
	for _, tc := range cases {
		if rate, burst := ProviderPace(tc.n, tc.least); rate != tc.wantRate || burst != tc.wantBurst {
			t.Errorf("%s a minute: rate %d, burst %d; want %d and %d", tc.name, rate, burst, tc.wantRate, tc.wantBurst)
		}
	}
}
