package v1_test

import (
	"fmt"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func ExampleParse() {
	c, err := gatewayv1.Parse([]byte(`
apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: openai
    baseURL: https://api.openai.com/v1
    apiKeyFile: openai.key
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    requestsPerMinute: 1500
    headroomPercent: 95
    prices:
      inputPerMillion: "0.15"
      cachedInputPerMillion: "0.075"
      outputPerMillion: "0.60"
      tiers: [{name: flex, inputPerMillion: "0.075", outputPerMillion: "0.30"}]
tenants:
  - name: acme
    keys: [{sha256: 860edb4dfaa237cb0c5019e8a1137fecbeaf4a7ef0dd63819e62a6de82eae7fb, user: alice}]
    providers: [openai]
    perUser: [{dimension: requests, amount: 1000, per: day}]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p := c.ProvidersOfModel("gpt-4o-mini")[0]
	m := p.Model("gpt-4o-mini")
	fmt.Println("provider:", p.Name, "at", p.WithHeadroom(p.RequestsPerMinute), "requests a minute")
	prices := p.PricesOf(m) // the model's own, or its provider's
	call := gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 768, Completion: m.DefaultMaxTokens}
	fmt.Println("a 1000-token prompt, 768 of it cached, with", m.DefaultMaxTokens, "tokens out costs",
		gatewayv1.MoneyFromMicro(prices.CostMicros("default", call)), "dollars, or on flex",
		gatewayv1.MoneyFromMicro(prices.CostMicros("flex", call)))
	acme := c.Tenants[0]
	fmt.Println("tenant:", acme.Name, acme.Priority, "waits at most", acme.MaxWait.Duration)
	fmt.Println("per user:", acme.PerUser[0].Amount, acme.PerUser[0].Dimension, "a", acme.PerUser[0].Per, "then", acme.PerUser[0].OnLimit)
	// Output:
	// provider: openai at 1425 requests a minute
	// a 1000-token prompt, 768 of it cached, with 256 tokens out costs 0.000246 dollars, or on flex 0.000152
	// tenant: acme Interactive waits at most 1m0s
	// per user: 1000 requests a day then Reject
}
