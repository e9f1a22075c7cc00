package ramp

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

const (
	// providerName and tenantName name the provider and the one tenant in
	// the gateway's configuration.
	providerName = "lab"
	tenantName   = "ramp"
	// providerKeyFile holds the provider's key, beside the configuration.
	providerKeyFile = "provider.key"
)

// userKey is the API key of user in a gateway case.
func userKey(user int) string { return fmt.Sprintf("sk-ramp-user-%03d-0123456789abcdef0123", user) }

// gatewayConfig is the gateway's configuration for a case whose limits
// behave as b, in front of the provider at providerURL, for users users.
//
// Both behaviours limit each user to a token bucket (UserBurst, UserRate a
// second) and everyone together to the provider's requests per minute. A
// queue drains on the provider's budgets, so Queue also gives the gateway
// the provider's published requests, tokens and calls in flight; Reject
// keeps to the two limits a plain token-bucket limiter has.
func gatewayConfig(opts Options, b gatewayv1.Behavior, providerURL string, users int) gatewayv1.Config {
	p := opts.Provider
	prov := gatewayv1.Provider{
		Name:    providerName,
		BaseURL: providerURL + "/v1",
		Prices:  pricesOf(p),
	}
	for _, m := range p.Models {
		prov.Models = append(prov.Models, gatewayv1.Model{Name: m, Encoding: encodingOf(m), DefaultMaxTokens: p.DefaultMaxTokens})
	}
	if p.APIKey != "" {
		prov.APIKeyFile = providerKeyFile
	}
	if b == gatewayv1.BehaviorQueue {
		prov.RequestsPerMinute, prov.TokensPerMinute, prov.MaxInFlight = p.RequestsPerMinute, p.TokensPerMinute, p.MaxInFlight
	}
	return gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Global:     []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: p.RequestsPerMinute, Per: gatewayv1.PeriodMinute, OnLimit: b}},
		Providers:  []gatewayv1.Provider{prov},
		Tenants:    []gatewayv1.Tenant{rampTenant(opts, b, users)},
	}
}

// encodingOf is the encoding OpenAI's model counts its tokens in, as a user names it in the
// gateway's configuration: o200k_base for the gpt-4o family, cl100k_base for the others the lab
// serves (text-embedding-3-*).
func encodingOf(model string) string {
	if strings.HasPrefix(model, "gpt-4o") {
		return "o200k_base"
	}
	return "cl100k_base"
}

// mixedTenants are the interactive case's tenants: user 0's key is the
// interactive tenant's, user 1's the batch tenant's.
func mixedTenants(opts Options) []gatewayv1.Tenant {
	tenant := func(name string, user int, p gatewayv1.Priority) gatewayv1.Tenant {
		return gatewayv1.Tenant{Name: name, Providers: []string{providerName}, Priority: p, MaxWait: metav1.Duration{Duration: opts.MaxWait},
			Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey(userKey(user)), User: name}}}
	}
	return []gatewayv1.Tenant{tenant("interactive", 0, gatewayv1.PriorityInteractive), tenant("batch", 1, gatewayv1.PriorityBatch)}
}

// sharedStore keeps the limits of replicas gateways in the Redis at addr.
func sharedStore(addr string, replicas int) gatewayv1.Store {
	return gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{Address: addr, Replicas: int32(replicas)}}
}

// rampTenant is the one tenant of a gateway case, with a key for each of
// users users and a bucket for each.
func rampTenant(opts Options, b gatewayv1.Behavior, users int) gatewayv1.Tenant {
	t := gatewayv1.Tenant{
		Name:      tenantName,
		Providers: []string{providerName},
		PerUser:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: opts.UserRate, Per: gatewayv1.PeriodSecond, Burst: opts.UserBurst, OnLimit: b}},
		MaxWait:   metav1.Duration{Duration: opts.MaxWait},
	}
	for u := range users {
		t.Keys = append(t.Keys, gatewayv1.Key{SHA256: gatewayv1.HashKey(userKey(u)), User: fmt.Sprintf("user-%03d", u)})
	}
	return t
}

// gatewayFiles are the files beside the gateway's configuration: the provider's key, if it has
// one.
func gatewayFiles(providerKey string) map[string]string {
	if providerKey == "" {
		return nil
	}
	return map[string]string{providerKeyFile: providerKey}
}
