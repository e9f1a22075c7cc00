package v1

import "testing"

// TestProviderPaceSizes sizes the paces of a provider's per-minute limits: each refills at 59/61
// of the limit and bursts a second of it.
func TestProviderPaceSizes(t *testing.T) {
	cases := []struct {
		name                string
		n                   int64
		wantRate, wantBurst int64
	}{
		{"1,500 requests", 1500, 1450, 25},
		{"300,000 tokens", 300_000, 290_163, 5000},
		{"10,000 tokens", 10_000, 9672, 166},
		{"$0.50 in micro-dollars", 500_000, 483_606, 8333},
		{"1 request", 1, 1, 1},
	}
	for _, tc := range cases {
		if rate, burst := ProviderPace(tc.n); rate != tc.wantRate || burst != tc.wantBurst {
			t.Errorf("%s a minute: rate %d, burst %d; want %d and %d", tc.name, rate, burst, tc.wantRate, tc.wantBurst)
		}
	}
}
