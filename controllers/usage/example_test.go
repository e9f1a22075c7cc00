package usage_test

import (
	"errors"
	"fmt"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// A gateway that did not answer is named in Unanswered; one that never
// answered adds nothing to the sums.
func ExampleSum() {
	queued := gatewayv1.ProviderUsage{Name: "openai", Traffic: gatewayv1.Traffic{Queued: 2}}
	totals := usage.Sum([]usage.GatewayReport{
		{Gateway: "gw-1", Usage: &gatewayv1.Usage{Providers: []gatewayv1.ProviderUsage{queued}}},
		{Gateway: "gw-2", Err: errors.New("connection refused")},
	})
	fmt.Println(totals.Providers["openai"].Queued, totals.Gateways, totals.Unanswered)
	// Output: 2 2 [gw-2: connection refused]
}
