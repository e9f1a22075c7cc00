package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

func TestPrice(t *testing.T) {
	defaults := DefaultOptions()
	tests := []struct {
		name string
		edit func(*Options)
		bill Bill
		tier string
		want int64
	}{{
		name: "a page at $3 per million",
		bill: Bill{InputTokens: 600, OutputTokens: 200},
		want: 2400,
	}, {
		name: "the worked example: every class, at priority",
		bill: Bill{InputTokens: 2500, CachedInputTokens: 1152, AudioInputTokens: 500, OutputTokens: 300, ReasoningTokens: 100, AudioOutputTokens: 100},
		tier: openai.TierPriority,
		want: 62_980, // ⌈2 × (848×3 + 1,152×0.3 + 500×40 + 200×3 + 100×80)⌉
	}, {
		name: "cached input at a tenth of the input price by default",
		bill: Bill{InputTokens: 1000, CachedInputTokens: 1000},
		want: 300,
	}, {
		name: "cached input at its own price",
		edit: func(o *Options) { o.CachedInputMicrosPerMillion = 1_500_000 },
		bill: Bill{InputTokens: 1100, CachedInputTokens: 1000},
		want: 1500 + 300,
	}, {
		name: "audio in and out at their prices; reasoning as output",
		bill: Bill{InputTokens: 510, AudioInputTokens: 500, OutputTokens: 160, ReasoningTokens: 100, AudioOutputTokens: 50},
		want: 10*3 + 500*40 + 110*3 + 50*80,
	}, {
		name: "flex halves the whole bill, then rounds up",
		bill: Bill{InputTokens: 1, OutputTokens: 0},
		tier: openai.TierFlex,
		want: 2, // ⌈1.5⌉
	}, {
		name: "a tier that is neither priority nor flex is the default",
		bill: Bill{InputTokens: 1},
		tier: "scale",
		want: 3,
	}, {
		name: "a fraction of a micro-dollar rounds up",
		edit: func(o *Options) { o.InputMicrosPerMillion, o.OutputMicrosPerMillion = 150_000, 600_000 },
		bill: Bill{InputTokens: 1, OutputTokens: 1},
		want: 1,
	}, {
		name: "a multiplier is taken to six decimal places",
		edit: func(o *Options) { o.InputMicrosPerMillion, o.PriorityMultiplier = 1_000_000, 1.1 },
		bill: Bill{InputTokens: 10},
		tier: openai.TierPriority,
		want: 11, // not 12, as 1.1's float64 would round
	}, {
		name: "free",
		edit: func(o *Options) { *o = Options{PriorityMultiplier: 2, FlexMultiplier: 0.5} },
		bill: Bill{InputTokens: 1000, CachedInputTokens: 500, OutputTokens: 1000},
		want: 0,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults
			if tc.edit != nil {
				tc.edit(&o)
			}
			got := o.price(tc.bill, tc.tier)
			want := tc.bill
			want.MicroDollars = tc.want
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("price() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		name   string
		model  string
		cap    int64
		audio  bool
		answer int64 // AnswerTokens
		want   Bill
	}{
		{name: "a model that does not reason answers up to its cap", model: "gpt-4o", cap: 300, want: Bill{OutputTokens: 300}},
		{name: "a reasoning model reasons within the cap", model: "o3-mini", cap: 300, want: Bill{OutputTokens: 300, ReasoningTokens: 100}},
		{name: "reasoning may take the whole cap", model: "o4-mini", cap: 60, want: Bill{OutputTokens: 60, ReasoningTokens: 60}},
		{name: "gpt-5 reasons", model: "gpt-5-mini", cap: 200, want: Bill{OutputTokens: 200, ReasoningTokens: 100}},
		{name: "an answer in audio is half audio, rounded down", model: "gpt-4o", cap: 101, audio: true, want: Bill{OutputTokens: 101, AudioOutputTokens: 50}},
		{name: "reasoning is not audio", model: "o3", cap: 301, audio: true, want: Bill{OutputTokens: 301, ReasoningTokens: 100, AudioOutputTokens: 100}},
		{name: "answer tokens end an answer before a larger cap", model: "o3", cap: 1000, answer: 50, want: Bill{OutputTokens: 150, ReasoningTokens: 100}},
		{name: "answer tokens do not lengthen an answer past its cap", model: "gpt-4o", cap: 30, answer: 50, want: Bill{OutputTokens: 30}},
		{name: "an embedding makes nothing", model: "text-embedding-3-small", cap: 0, want: Bill{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.AnswerTokens = tc.answer
			got := o.completion(tc.cap, o.reasoning(tc.model))
			if tc.audio {
				got = spoken(got)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("completion of %s capped at %d mismatch (-got +want):\n%s", tc.model, tc.cap, diff)
			}
		})
	}
}

func TestOnlyAChatReasons(t *testing.T) {
	o := DefaultOptions()
	for _, tc := range []struct {
		e    openai.Endpoint
		want int64
	}{{openai.Chat, 100}, {openai.Completions, 0}} {
		a := o.chatAsk(openai.Request{Endpoint: tc.e, Model: "o3", CompletionTokens: 200})
		if a.whole.ReasoningTokens != tc.want {
			t.Errorf("a call to %s reasons %d tokens; want %d", tc.e.Path(), a.whole.ReasoningTokens, tc.want)
		}
	}
}

func TestReasons(t *testing.T) {
	tests := []struct {
		models []string
		model  string
		want   bool
	}{
		{model: "o1", want: true},
		{model: "o3-mini", want: true},
		{model: "o4-mini-deep-research", want: true},
		{model: "gpt-5", want: true},
		{model: "gpt-5.1-codex", want: true},
		{model: "gpt-4o", want: false},
		{model: "omni-moderation-latest", want: false},
		{model: "o", want: false},
		{models: []string{"lab-think"}, model: "lab-think-2", want: true},
		{models: []string{"lab-think"}, model: "o3", want: false},
		{models: []string{}, model: "gpt-5", want: false},
	}
	for _, tc := range tests {
		o := Options{ReasoningModels: tc.models}
		if got := o.reasons(tc.model); got != tc.want {
			t.Errorf("with ReasoningModels %q, reasons(%q) = %v; want %v", tc.models, tc.model, got, tc.want)
		}
	}
}

func TestCharge(t *testing.T) {
	b := Bill{InputTokens: 2500, CachedInputTokens: 2432, AudioInputTokens: 0}
	tests := []struct {
		name         string
		cachedCounts bool
		want         counts
	}{
		{name: "cached reads do not count as input", want: counts{allTokens: 2500 + 900, inputTokens: 68, outputTokens: 900}},
		{name: "unless the account says they do", cachedCounts: true, want: counts{allTokens: 2500 + 900, inputTokens: 2500, outputTokens: 900}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{CachedCountsAsInput: tc.cachedCounts}
			if got := o.charge(b, 900); got != tc.want {
				t.Errorf("charge() = %v; want %v", got, tc.want)
			}
		})
	}
}
