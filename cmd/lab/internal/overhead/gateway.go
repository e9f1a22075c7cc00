package overhead

import (
	"fmt"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

const (
	// users is how many users the requests come from, in turn, each with
	// its own key, so the per-user level has more than one bucket.
	users = 10
	// headroom is how many times what the run needs each of the gateway's
	// limits allows.
	headroom = 10
	// requestTokens bounds a request's tokens as the gateway estimates
	// them, of any shape: the long prompt and its answer, or a chat that
	// names no max_tokens and so is estimated at its model's default.
	requestTokens = 50_000
	// stubProvider and tenant name the gateway's one provider and tenant.
	stubProvider = "stub"
	tenant       = "lab"
)

// userKey is the API key of user.
func userKey(user int) string { return fmt.Sprintf("sk-overhead-user-%02d", user) }

// gatewayConfig is the gateway in front of the stub at stubURL, with a
// limit at each of the five levels (user, tenant, endpoint, global,
// provider), each set to queue and to allow headroom times the peak rate
// and its tokens, and headroom times workers in flight.
func gatewayConfig(stubURL string, peak, workers int) gatewayv1.Config {
	perSecond := int64(headroom * peak)
	perMinute := 60 * perSecond
	provider := limitsFor(peak)
	return gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Global:     queue(gatewayv1.DimensionRequests, perSecond, gatewayv1.PeriodSecond),
		Providers: []gatewayv1.Provider{{
			Name:              stubProvider,
			BaseURL:           stubURL + "/v1",
			Models:            []gatewayv1.Model{{Name: model, Encoding: encoding}, {Name: embeddingModel, Encoding: embeddingEncoding}},
			RequestsPerMinute: provider.requests,
			TokensPerMinute:   provider.tokens,
			MaxInFlight:       int64(headroom * workers),
			Prices:            gatewayv1.Prices{InputPerMillion: "3.00", OutputPerMillion: "3.00"},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name:      tenant,
			Keys:      keys(),
			Providers: []string{stubProvider},
			PerUser:   queue(gatewayv1.DimensionRequests, perSecond, gatewayv1.PeriodSecond),
			PerTenant: queue(gatewayv1.DimensionTokens, tokensPerMinute(perMinute), gatewayv1.PeriodMinute),
			Endpoints: []gatewayv1.EndpointLimits{{
				Endpoint: gatewayv1.EndpointChat,
				Limits:   queue(gatewayv1.DimensionRequests, perMinute, gatewayv1.PeriodMinute),
			}, {
				Endpoint: gatewayv1.EndpointEmbeddings,
				Limits:   queue(gatewayv1.DimensionRequests, perMinute, gatewayv1.PeriodMinute),
			}},
		}},
	}
}

// providerLimits are the stub's limits a minute, as its rate-limit headers
// report them and the gateway is configured with them.
type providerLimits struct{ requests, tokens int64 }

// maxTokensPerMinute is the most tokens a minute a limit of the gateway
// may hold: one a nanosecond.
const maxTokensPerMinute = 60_000_000_000

// limitsFor is the stub's limits for a run whose highest rate is peak:
// headroom times what the run needs, and at most maxTokensPerMinute
// tokens.
func limitsFor(peak int) providerLimits {
	perMinute := int64(60 * headroom * peak)
	return providerLimits{requests: perMinute, tokens: tokensPerMinute(perMinute)}
}

// tokensPerMinute is the tokens of requests calls a minute, each of
// requestTokens, at most maxTokensPerMinute.
func tokensPerMinute(requests int64) int64 { return min(requests*requestTokens, maxTokensPerMinute) }

// queue is one limit of amount per period that queues what is over it.
func queue(d gatewayv1.Dimension, amount int64, per gatewayv1.Period) []gatewayv1.Limit {
	return []gatewayv1.Limit{{Dimension: d, Amount: amount, Per: per, OnLimit: gatewayv1.BehaviorQueue}}
}

// keys are the tenant's keys, one per user.
func keys() []gatewayv1.Key {
	out := make([]gatewayv1.Key, users)
	for u := range out {
		out[u] = gatewayv1.Key{SHA256: gatewayv1.HashKey(userKey(u)), User: fmt.Sprintf("user-%02d", u)}
	}
	return out
}
