package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// billedPrices are the billed table's prices: $1 a million prompt tokens, a tenth of that for
// those the provider read from its cache, $2 a million completion tokens, and a priority tier at
// twice each.
var billedPrices = gatewayv1.Prices{InputPerMillion: "1.00", CachedInputPerMillion: "0.10", OutputPerMillion: "2.00",
	Tiers: []gatewayv1.TierPrices{{Name: "priority", InputPerMillion: "2.00", CachedInputPerMillion: "0.20", OutputPerMillion: "4.00"}}}

// billedBody is a chat call of a prompt long enough to hold the 1,000 tokens its answers report.
var billedBody = `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("Say hello. ", 100) + `"}]}`

// billedUsage is a usage of 1,000 prompt tokens, 900 of them cached, and 20 completion tokens.
const billedUsage = `{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,` +
	`"prompt_tokens_details":{"cached_tokens":900,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}`

// TestSettleChargesEachClassAtItsPrice has the provider answer with 900 of 1,000 prompt tokens
// cached, on the tier its answer names or none: the tenant is charged each class at its own
// price, at the tier the answer names, else the one the call asked for.
func TestSettleChargesEachClassAtItsPrice(t *testing.T) {
	standard := int64(100*1 + 900*0.1 + 20*2) // 230
	priority := int64(100*2 + 900*0.2 + 20*4) // 460
	tests := []struct {
		name   string
		asked  string // the request's service_tier
		answer string // the answer's service_tier
		stream bool
		want   int64
	}{
		{name: "cached tokens at a tenth of the price", want: standard},
		{name: "the priority tier the answer names", answer: "priority", want: priority},
		{name: "the tier asked for, when the answer names none", asked: "priority", want: priority},
		{name: "the tier the answer names over the one asked for", asked: "priority", answer: "default", want: standard},
		{name: "a stream's final usage chunk, at its tier", answer: "priority", stream: true, want: priority},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				answerWithUsage(w, tc.answer, tc.stream)
			}))
			t.Cleanup(provider.Close)
			cfg := settleConfig(provider.URL)
			cfg.Providers[0].Prices = billedPrices
			cfg.Default()
			g := newSettleGatewayFrom(t, cfg)
			body := billedBody
			if tc.asked != "" {
				body = strings.Replace(body, `{"model"`, `{"service_tier":"`+tc.asked+`","model"`, 1)
			}
			if tc.stream {
				body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
			}
			if status, answer := g.send(t, http.MethodPost, "/v1/chat/completions", settleKey, body); status != http.StatusOK {
				t.Fatalf("status %d (%.300s); want 200", status, answer)
			}
			if got, want := g.charged(t), (charged{requests: 1, tokens: 1020, micros: tc.want}); got != want {
				t.Errorf("charged %+v; want %+v", got, want)
			}
			if diff := billedTokens(t, g); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// answerWithUsage answers a chat call with billedUsage, and the service tier tier unless it is
// empty: as one JSON answer, or as a stream whose final chunk carries the usage.
func answerWithUsage(w http.ResponseWriter, tier string, stream bool) {
	tierField := ""
	if tier != "" {
		tierField = `"service_tier":"` + tier + `",`
	}
	if !stream {
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion",%s"choices":[{"index":0,"message":{"role":"assistant","content":"Hello."}}],"usage":%s}`,
			tierField, billedUsage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",%s\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello.\"}}]}\n\n", tierField)
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",%s\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", tierField, billedUsage)
}

// billedTokens says how the gateway's count of billed tokens differs from billedUsage's classes,
// or returns "".
func billedTokens(t *testing.T, g *settleGateway) string {
	t.Helper()
	families, err := g.opts.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "sluice_gateway_billed_tokens_total" {
			for _, m := range f.GetMetric() {
				got[label(m, "class")] += m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"input": 100, "cached_input": 900, "output": 20}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Sprintf("billed tokens by class %v; want %v", got, want)
	}
	return ""
}

// label is the value of m's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestTheEstimateIsPricedAtTheTierAskedFor checks what a call is charged at admission: every
// prompt token at the input price of the tier its request asks for, as nothing is known yet of
// what the provider's cache holds.
func TestTheEstimateIsPricedAtTheTierAskedFor(t *testing.T) {
	cfg := settleConfig("http://127.0.0.1:1")
	cfg.Providers[0].Prices = billedPrices
	cfg.Default()
	g := newSettleGatewayFrom(t, cfg)
	for tier, perToken := range map[string][2]int64{"": {1, 2}, "auto": {1, 2}, "default": {1, 2}, "priority": {2, 4}, "flex": {1, 2}} {
		body := strings.Replace(billedBody, `{"model"`, `{"service_tier":"`+tier+`","model"`, 1)
		c, apiErr := g.newCall(context.Background(), g.policy, g.policy.Caller(settleKey), "chat", []byte(body))
		if apiErr != nil {
			t.Fatal(apiErr.Message)
		}
		if want := c.estimate.PromptTokens*perToken[0] + c.estimate.CompletionTokens*perToken[1]; c.cost.MicroDollars != want {
			t.Errorf("a call asking for tier %q is estimated at %d micro-dollars; want %d", tier, c.cost.MicroDollars, want)
		}
	}
}
