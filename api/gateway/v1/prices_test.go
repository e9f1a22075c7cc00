package v1_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func TestCostMicros(t *testing.T) {
	lab := gatewayv1.Prices{InputPerMillion: "3.00", OutputPerMillion: "3.00"}
	mini := gatewayv1.Prices{InputPerMillion: "0.15", CachedInputPerMillion: "0.075", OutputPerMillion: "0.60"}
	// gpt4o has OpenAI's prices for gpt-4o, and a flex tier at half of them that lists only
	// input and output.
	gpt4o := gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", OutputPerMillion: "10", Tiers: []gatewayv1.TierPrices{
		{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "2.125", OutputPerMillion: "17"},
		{Name: "flex", InputPerMillion: "1.25", OutputPerMillion: "5"},
	}}
	audio := gatewayv1.Prices{InputPerMillion: "2.50", AudioInputPerMillion: "40", OutputPerMillion: "10", AudioOutputPerMillion: "80"}
	claude := gatewayv1.Prices{InputPerMillion: "3", CachedInputPerMillion: "0.30", CacheWritePerMillion: "3.75", OutputPerMillion: "15"}
	largest := gatewayv1.Money("9223372036854.775807")
	dearest := gatewayv1.Prices{InputPerMillion: largest, CachedInputPerMillion: largest, CacheWritePerMillion: largest,
		AudioInputPerMillion: largest, OutputPerMillion: largest, AudioOutputPerMillion: largest}
	tests := []struct {
		name   string
		prices gatewayv1.Prices
		tier   string
		tokens gatewayv1.Tokens
		want   int64
	}{
		{name: "a lab page", prices: lab, tokens: gatewayv1.Tokens{Prompt: 800}, want: 2400},
		{name: "a 100-page book", prices: lab, tokens: gatewayv1.Tokens{Prompt: 80_000}, want: 240_000},
		{name: "input and output priced apart", prices: mini, tokens: gatewayv1.Tokens{Prompt: 1_000_000, Completion: 1_000_000}, want: 750_000},
		{name: "a fraction of a micro-dollar rounds up", prices: mini, tokens: gatewayv1.Tokens{Prompt: 1}, want: 1},
		{name: "an exact micro-dollar does not round", prices: gatewayv1.Prices{InputPerMillion: "0.000001"}, tokens: gatewayv1.Tokens{Prompt: 1_000_000}, want: 1},
		{name: "just past a micro-dollar rounds up", prices: gatewayv1.Prices{InputPerMillion: "0.000001"}, tokens: gatewayv1.Tokens{Prompt: 1_000_001}, want: 2},
		{name: "every class rounds once, together", prices: mini, tokens: gatewayv1.Tokens{Prompt: 2, CachedPrompt: 1, Completion: 1}, want: 1},
		{name: "no tokens", prices: lab, want: 0},
		{name: "free", prices: gatewayv1.Prices{}, tokens: gatewayv1.Tokens{Prompt: 5000, CachedPrompt: 10, Completion: 5000}, want: 0},
		{name: "negative tokens count as zero", prices: lab, tokens: gatewayv1.Tokens{Prompt: -100, CachedPrompt: -5, Completion: 10, AudioCompletion: -3}, want: 30},
		{name: "large but exact", prices: lab, tokens: gatewayv1.Tokens{Prompt: 1 << 40, Completion: 1 << 40}, want: 6 << 40},

		{name: "cached prompt tokens at their own price", prices: gpt4o, tokens: gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 900, Completion: 100},
			want: 100*2.5 + 900*1.25 + 100*10},
		{name: "an unset class is the input price: no discount assumed", prices: lab, tokens: gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 900}, want: 3000},
		{name: "reasoning is output", prices: gpt4o, tokens: gatewayv1.Tokens{Prompt: 10, Completion: 100, Reasoning: 80}, want: 25 + 1000},
		{name: "audio in and out at their own prices", prices: audio,
			tokens: gatewayv1.Tokens{Prompt: 517, AudioPrompt: 500, Completion: 97, AudioCompletion: 79},
			want:   26543}, // 17 × 2.50 + 500 × 40 + 18 × 10 + 79 × 80 = 26542.5
		{name: "cache writes and reads", prices: claude, tokens: gatewayv1.Tokens{Prompt: 10_000, CacheWrite: 5000, CachedPrompt: 3000, Completion: 100},
			want: 2000*3 + 5000*3.75 + 3000*0.30 + 100*15},
		{name: "classes past the prompt: each priced, the plain prompt none", prices: gpt4o, tokens: gatewayv1.Tokens{Prompt: 10, CachedPrompt: 20}, want: 25},

		{name: "a tier at its own prices", prices: gpt4o, tier: "priority", tokens: gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 900, Completion: 100},
			want: 4038}, // 100 × 4.25 + 900 × 2.125 + 100 × 17 = 4037.5
		{name: "a class a tier leaves unset is the tier's input price", prices: gpt4o, tier: "flex",
			tokens: gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 900, Completion: 100}, want: 1000*1.25 + 100*5},
		{name: "a tier's unset input is the standard one", tier: "priority", tokens: gatewayv1.Tokens{Prompt: 1000, Completion: 1000},
			prices: gatewayv1.Prices{InputPerMillion: "2", OutputPerMillion: "8", Tiers: []gatewayv1.TierPrices{{Name: "priority", OutputPerMillion: "16"}}},
			want:   1000*2 + 1000*16},
		{name: "auto is the standard prices", prices: gpt4o, tier: "auto", tokens: gatewayv1.Tokens{Prompt: 1000, Completion: 100}, want: 2500 + 1000},
		{name: "default is the standard prices", prices: gpt4o, tier: "default", tokens: gatewayv1.Tokens{Prompt: 1000, Completion: 100}, want: 2500 + 1000},
		{name: "a tier not listed is the standard prices", prices: gpt4o, tier: "scale", tokens: gatewayv1.Tokens{Prompt: 1000, Completion: 100}, want: 2500 + 1000},

		{name: "past int64 saturates", prices: gatewayv1.Prices{InputPerMillion: "1000000"}, tokens: gatewayv1.Tokens{Prompt: math.MaxInt64}, want: math.MaxInt64},
		{name: "just below saturation", prices: gatewayv1.Prices{InputPerMillion: "0.000001"}, tokens: gatewayv1.Tokens{Prompt: math.MaxInt64},
			want: math.MaxInt64/1_000_000 + 1},
		{name: "every class of int64's largest at the largest price saturates", prices: dearest,
			tokens: gatewayv1.Tokens{Prompt: math.MaxInt64, CachedPrompt: math.MaxInt64, CacheWrite: math.MaxInt64, AudioPrompt: math.MaxInt64,
				Completion: math.MaxInt64, Reasoning: math.MaxInt64, AudioCompletion: math.MaxInt64 / 2},
			want: math.MaxInt64},
		{name: "classes that sum past int64 saturate", prices: gatewayv1.Prices{InputPerMillion: "1000000"},
			tokens: gatewayv1.Tokens{Prompt: 10, CachedPrompt: math.MaxInt64, CacheWrite: math.MaxInt64}, want: math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.prices.CostMicros(tc.tier, tc.tokens); got != tc.want {
				t.Errorf("CostMicros(%q, %+v) = %d; want %d", tc.tier, tc.tokens, got, tc.want)
			}
		})
	}
}

func TestMicroPricesZeroIsFree(t *testing.T) {
	var free gatewayv1.MicroPrices
	if got := free.CostMicros("priority", gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 10, Completion: 1000}); got != 0 {
		t.Errorf("the zero MicroPrices cost %d; want 0", got)
	}
}

func TestTokensPlain(t *testing.T) {
	tests := []struct {
		tokens             gatewayv1.Tokens
		prompt, completion int64
	}{
		{gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 600, CacheWrite: 100, AudioPrompt: 200, Completion: 50, Reasoning: 40, AudioCompletion: 10}, 100, 40},
		{gatewayv1.Tokens{Prompt: 10, CachedPrompt: 20, Completion: 5, AudioCompletion: 6}, 0, 0},
		{gatewayv1.Tokens{Prompt: math.MaxInt64, CachedPrompt: math.MaxInt64, CacheWrite: math.MaxInt64}, 0, 0},
		{gatewayv1.Tokens{Prompt: -1, CachedPrompt: -1, Completion: 7, AudioCompletion: -1}, 0, 7},
	}
	for _, tc := range tests {
		if got, got2 := tc.tokens.PlainPrompt(), tc.tokens.PlainCompletion(); got != tc.prompt || got2 != tc.completion {
			t.Errorf("%+v: PlainPrompt() = %d, PlainCompletion() = %d; want %d, %d", tc.tokens, got, got2, tc.prompt, tc.completion)
		}
	}
}

func TestPricesDefault(t *testing.T) {
	p := gatewayv1.Provider{
		Prices: gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", OutputPerMillion: "10", Tiers: []gatewayv1.TierPrices{
			{Name: "priority", InputPerMillion: "4.25", OutputPerMillion: "17"},
			{Name: "flex"},
		}},
		Models: []gatewayv1.Model{
			{Name: "gpt-4o"},
			{Name: "gpt-4o-2024-05-13", Prices: &gatewayv1.Prices{InputPerMillion: "5", OutputPerMillion: "x"}},
		},
	}
	p.Default()
	want := gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", CacheWritePerMillion: "2.50", AudioInputPerMillion: "2.50",
		OutputPerMillion: "10", AudioOutputPerMillion: "10", Tiers: []gatewayv1.TierPrices{
			{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "4.25", CacheWritePerMillion: "4.25", AudioInputPerMillion: "4.25",
				OutputPerMillion: "17", AudioOutputPerMillion: "17"},
			{Name: "flex", InputPerMillion: "2.50", CachedInputPerMillion: "2.50", CacheWritePerMillion: "2.50", AudioInputPerMillion: "2.50",
				OutputPerMillion: "10", AudioOutputPerMillion: "10"},
		}}
	if diff := cmp.Diff(p.Prices, want); diff != "" {
		t.Errorf("the provider's prices, defaulted (-got +want):\n%s", diff)
	}
	// An invalid price is left for Validate to report once, not copied to the classes.
	wantModel := &gatewayv1.Prices{InputPerMillion: "5", CachedInputPerMillion: "5", CacheWritePerMillion: "5", AudioInputPerMillion: "5", OutputPerMillion: "x"}
	if diff := cmp.Diff(p.Models[1].Prices, wantModel); diff != "" {
		t.Errorf("the model's prices, defaulted (-got +want):\n%s", diff)
	}
	if p.Models[0].Prices != nil {
		t.Errorf("a model without prices has %+v after Default; want none: its provider's apply", p.Models[0].Prices)
	}
}

func TestPricesOf(t *testing.T) {
	own := &gatewayv1.Prices{InputPerMillion: "5", OutputPerMillion: "15"}
	p := gatewayv1.Provider{Prices: gatewayv1.Prices{InputPerMillion: "2.50", OutputPerMillion: "10"},
		Models: []gatewayv1.Model{{Name: "gpt-4o"}, {Name: "gpt-4o-2024-05-13", Prices: own}}}
	if got := p.PricesOf(&p.Models[0]); got != &p.Prices {
		t.Errorf("PricesOf(gpt-4o) = %+v; want the provider's", got)
	}
	if got := p.PricesOf(&p.Models[1]); got != own {
		t.Errorf("PricesOf(gpt-4o-2024-05-13) = %+v; want the model's own", got)
	}
}
