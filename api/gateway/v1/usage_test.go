package v1_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// TestUsageJSON pins the snapshot's wire form: lower-camel-case names, the
// traffic counts inline.
func TestUsageJSON(t *testing.T) {
	reset := metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	u := gatewayv1.Usage{
		Gateway: "gateway-0",
		Time:    metav1.NewTime(time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)),
		Providers: []gatewayv1.ProviderUsage{{
			Name:           "openai",
			Traffic:        gatewayv1.Traffic{RequestsLastMinute: 1400, TokensLastMinute: 280000, InFlight: 180, Queued: 12, QueuedTokens: 9600, Refused: map[string]int64{"maxWait": 3}},
			Throttles:      1,
			SpendThisMonth: "12.5",
		}},
		Tenants: []gatewayv1.TenantUsage{{
			Name:            "acme",
			Traffic:         gatewayv1.Traffic{RequestsLastMinute: 60},
			SpendThisPeriod: "0.0024",
			BudgetRemaining: "4999.9976",
			ResetsAt:        &reset,
		}},
	}
	got, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"gateway":"gateway-0","time":"2026-01-15T12:00:00Z",` +
		`"providers":[{"name":"openai","requestsLastMinute":1400,"tokensLastMinute":280000,"inFlight":180,"queued":12,"queuedTokens":9600,"refused":{"maxWait":3},"throttles":1,"spendThisMonth":"12.5"}],` +
		`"tenants":[{"name":"acme","requestsLastMinute":60,"tokensLastMinute":0,"inFlight":0,"queued":0,"queuedTokens":0,"spendThisPeriod":"0.0024","budgetRemaining":"4999.9976","resetsAt":"2026-02-01T00:00:00Z"}]}`
	if diff := cmp.Diff(string(got), want); diff != "" {
		t.Errorf("json.Marshal(Usage) mismatch (-got +want):\n%s", diff)
	}
	var back gatewayv1.Usage
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(back, u); diff != "" {
		t.Errorf("round trip mismatch (-got +want):\n%s", diff)
	}
}

// TestQueuesReadAsUsage checks that a queue snapshot decodes as a usage
// snapshot with only its queue counts, so that one poller reads both.
func TestQueuesReadAsUsage(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC))
	q := gatewayv1.Queues{
		Gateway:   "gateway-0",
		Time:      at,
		Providers: []gatewayv1.QueueDepth{{Name: "openai", Queued: 12, QueuedTokens: 9600}},
		Tenants:   []gatewayv1.QueueDepth{{Name: "acme", Queued: 2, QueuedTokens: 1600}},
	}
	data, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	var got gatewayv1.Usage
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := gatewayv1.Usage{
		Gateway:   "gateway-0",
		Time:      at,
		Providers: []gatewayv1.ProviderUsage{{Name: "openai", Traffic: gatewayv1.Traffic{Queued: 12, QueuedTokens: 9600}}},
		Tenants:   []gatewayv1.TenantUsage{{Name: "acme", Traffic: gatewayv1.Traffic{Queued: 2, QueuedTokens: 1600}}},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Queues read as Usage (-got +want):\n%s", diff)
	}
}
