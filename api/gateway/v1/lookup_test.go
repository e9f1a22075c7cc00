package v1_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func TestProvider(t *testing.T) {
	c := validConfig()
	tests := []struct {
		name string
		want *gatewayv1.Provider
	}{
		{name: "openai", want: &c.Providers[0]},
		{name: "local", want: &c.Providers[1]},
		{name: "anthropic", want: nil},
		{name: "", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Provider(tc.name); got != tc.want {
				t.Errorf("Provider(%q) = %p, want %p", tc.name, got, tc.want)
			}
		})
	}
}

func TestProvidersOfModel(t *testing.T) {
	c := validConfig()
	second := c.Providers[0]
	second.Name = "openai-eu"
	c.Providers = append(c.Providers, second)
	tests := []struct {
		model string
		want  []*gatewayv1.Provider
	}{
		{model: "gpt-4o", want: []*gatewayv1.Provider{&c.Providers[0], &c.Providers[2]}},
		{model: "llama", want: []*gatewayv1.Provider{&c.Providers[1]}},
		{model: "gpt-5"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			got := c.ProvidersOfModel(tc.model)
			if len(got) != len(tc.want) {
				t.Fatalf("ProvidersOfModel(%q) = %d providers, want %d", tc.model, len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("ProvidersOfModel(%q)[%d] = %s, want %s", tc.model, i, got[i].Name, tc.want[i].Name)
				}
			}
		})
	}
}

func TestProviderModel(t *testing.T) {
	c := validConfig()
	if got := c.Providers[0].Model("gpt-4o-mini"); got != &c.Providers[0].Models[1] {
		t.Errorf("Model(gpt-4o-mini) = %p, want the provider's second model", got)
	}
	if got := c.Providers[0].Model("llama"); got != nil {
		t.Errorf("Model(llama) = %v, want nil: another provider's model", got)
	}
}

// BenchmarkProvidersOfModel measures the scan on a large configuration: ten
// providers of ten models each, looking up the last model.
func BenchmarkProvidersOfModel(b *testing.B) {
	c := &gatewayv1.Config{}
	for i := range 10 {
		p := gatewayv1.Provider{Name: fmt.Sprintf("p%d", i)}
		for j := range 10 {
			p.Models = append(p.Models, gatewayv1.Model{Name: fmt.Sprintf("provider-%d-model-%d", i, j)})
		}
		c.Providers = append(c.Providers, p)
	}
	for b.Loop() {
		c.ProvidersOfModel("provider-9-model-9")
	}
}

func TestWithHeadroom(t *testing.T) {
	tests := []struct {
		headroom int32
		limit    int64
		want     int64
	}{
		{headroom: 95, limit: 1500, want: 1425},
		{headroom: 95, limit: 300_000, want: 285_000},
		{headroom: 95, limit: 200, want: 190},
		{headroom: 95, limit: 150, want: 142},
		{headroom: 10, limit: 1, want: 1},
		{headroom: 95, limit: 0, want: 0},
		{headroom: 100, limit: 1500, want: 1500},
		{headroom: 0, limit: 1500, want: 1500},
		{headroom: 50, limit: 1<<62 + 1, want: 1 << 61},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d%% of %d", tc.headroom, tc.limit), func(t *testing.T) {
			p := &gatewayv1.Provider{HeadroomPercent: tc.headroom}
			if got := p.WithHeadroom(tc.limit); got != tc.want {
				t.Errorf("WithHeadroom(%d) = %d, want %d", tc.limit, got, tc.want)
			}
		})
	}
}

func TestHashKey(t *testing.T) {
	// printf %s sk-acme-alice | sha256sum
	got := gatewayv1.HashKey("sk-acme-alice")
	want := "860edb4dfaa237cb0c5019e8a1137fecbeaf4a7ef0dd63819e62a6de82eae7fb"
	if got != want {
		t.Errorf("HashKey() = %q, want %q", got, want)
	}
}

func TestPeriod(t *testing.T) {
	type result struct {
		Calendar bool
		Duration time.Duration
	}
	var got []result
	for _, p := range []gatewayv1.Period{"second", "minute", "hour", "day", "month", "week"} {
		got = append(got, result{p.IsCalendar(), p.Duration()})
	}
	want := []result{{false, time.Second}, {false, time.Minute}, {false, time.Hour}, {true, 0}, {true, 0}, {false, 0}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("periods mismatch (-got +want):\n%s", diff)
	}
}

func TestBudgetLimit(t *testing.T) {
	b := &gatewayv1.Budget{Amount: "5000", Period: gatewayv1.PeriodMonth}
	want := gatewayv1.Limit{Dimension: gatewayv1.DimensionDollars, Dollars: "5000", Per: gatewayv1.PeriodMonth, OnLimit: gatewayv1.BehaviorReject}
	if diff := cmp.Diff(b.Limit(), want); diff != "" {
		t.Errorf("Limit() mismatch (-got +want):\n%s", diff)
	}
}
