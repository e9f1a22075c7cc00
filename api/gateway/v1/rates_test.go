package v1

import "testing"

// TestProviderPaceSizes sizes the paces of a provider's per-minute limits: each refills at 59/61
// of the limit; requests, which come one a call, burst a second of it; tokens and dollars, which
// come in calls of any size, a tenth, and tokens at least 16,384 (but no more than the limit).
func TestProviderPaceSizes(t *testing.T) {
	cases := []struct {
		name                string
		n, fraction, least  int64
		wantRate, wantBurst int64
	}{
		{"1,500 requests", 1500, RequestsBurstFraction, 0, 1450, 25},
		{"300,000 tokens", 300_000, TokensBurstFraction, MinTokenBurst, 290_163, 30_000},
		{"30,000 tokens", 30_000, TokensBurstFraction, MinTokenBurst, 29_016, 16_384},
		{"10,000 tokens", 10_000, TokensBurstFraction, MinTokenBurst, 9672, 10_000},
		{"$0.50 in micro-dollars", 500_000, SpendBurstFraction, 0, 483_606, 50_000},
		{"1 request", 1, RequestsBurstFraction, 0, 1, 1},
	}
	for _, tc := range cases {
		if rate, burst := ProviderPace(tc.n, tc.fraction, tc.least); rate != tc.wantRate || burst != tc.wantBurst {
			t.Errorf("%s a minute: rate %d, burst %d; want %d and %d", tc.name, rate, burst, tc.wantRate, tc.wantBurst)
		}
	}
}
