package overhead

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/labtest"
)

func TestAddFlags(t *testing.T) {
	got, err := labtest.ParseFlags(DefaultOptions(), "-rates", "100, 200", "-step", "1s", "-rounds", "1", "-warmup", "0", "-workers", "8", "-pin=false", "-gateway", "/tmp/gw",
		"-tracing", "0.01, 1", "-shapes", "chat, stream", "-connections", "64", "-stores", "memory,redis", "-redis-server", "/tmp/redis", "-soak", "10m")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Rates: []int{100, 200}, Step: time.Second, Rounds: 1, Warmup: 0, Workers: 8, Gateway: "/tmp/gw", Tracing: []float64{0.01, 1},
		Shapes: []string{ShapeChat, ShapeStream}, Connections: 64, Stores: []string{"memory", "redis"}, RedisServer: "/tmp/redis", Soak: 10 * time.Minute}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("options (-got +want):\n%s", diff)
	}
}

func TestAddFlagsRefusesARateThatIsNotANumber(t *testing.T) {
	if _, err := labtest.ParseFlags(DefaultOptions(), "-rates", "500,lots"); err == nil || !strings.Contains(err.Error(), "flag -rates") {
		t.Errorf("Parse(-rates 500,lots) = %v; want the rates refused", err)
	}
}

func TestAddFlagsRefusesAShareThatIsNotANumber(t *testing.T) {
	if _, err := labtest.ParseFlags(DefaultOptions(), "-tracing", "0.01,all"); err == nil || !strings.Contains(err.Error(), "flag -tracing") {
		t.Errorf("Parse(-tracing 0.01,all) = %v; want the shares refused", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{name: "the defaults", change: func(*Options) {}},
		{name: "no warm-up", change: func(o *Options) { o.Warmup = 0 }},
		{name: "no rates", change: func(o *Options) { o.Rates = nil }, wantErr: "Rates must be positive and increasing"},
		{name: "a zero rate", change: func(o *Options) { o.Rates = []int{0, 100} }, wantErr: "Rates must be positive and increasing"},
		{name: "rates not increasing", change: func(o *Options) { o.Rates = []int{500, 500} }, wantErr: "Rates must be positive and increasing"},
		{name: "no step", change: func(o *Options) { o.Step = 0 }, wantErr: "Step must be positive"},
		{name: "a negative warm-up", change: func(o *Options) { o.Warmup = -time.Second }, wantErr: "Warmup not negative"},
		{name: "no rounds", change: func(o *Options) { o.Rounds = 0 }, wantErr: "Rounds and Workers must be positive"},
		{name: "no workers", change: func(o *Options) { o.Workers = 0 }, wantErr: "Rounds and Workers must be positive"},
		{name: "traced at 1% and at every call", change: func(o *Options) { o.Tracing = []float64{0.01, 1} }},
		{name: "traced at no call", change: func(o *Options) { o.Tracing = []float64{0} }, wantErr: "above 0 and at most 1"},
		{name: "traced past every call", change: func(o *Options) { o.Tracing = []float64{1.5} }, wantErr: "above 0 and at most 1"},
		{name: "traced twice at one share", change: func(o *Options) { o.Tracing = []float64{0.5, 0.5} }, wantErr: "must differ"},
		{name: "every shape, on closed loop, in both stores", change: func(o *Options) {
			o.Shapes, o.Connections, o.Stores = []string{"chat", "chat-uncapped", "stream", "embeddings", "long-prompt"}, 64, []string{"memory", "redis"}
		}},
		{name: "no shape", change: func(o *Options) { o.Shapes = nil }, wantErr: "Shapes must name one"},
		{name: "an unknown shape", change: func(o *Options) { o.Shapes = []string{"chat", "image"} }, wantErr: `no shape of call "image"`},
		{name: "negative connections", change: func(o *Options) { o.Connections = -1 }, wantErr: "Connections must not be negative"},
		{name: "an unknown store", change: func(o *Options) { o.Stores = []string{"disk"} }, wantErr: "memory or redis"},
		{name: "a soak of an hour", change: func(o *Options) { o.Soak = time.Hour }},
		{name: "a negative soak", change: func(o *Options) { o.Soak = -time.Second }, wantErr: "Soak must be from 0 to 1h0m0s"},
		{name: "a soak past an hour", change: func(o *Options) { o.Soak = time.Hour + time.Second }, wantErr: "Soak must be from 0 to 1h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			tc.change(&opts)
			err := opts.validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validate() = %v; want %q", err, tc.wantErr)
			}
		})
	}
}
