package server

import (
	"net/http"
	"strconv"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The headers Sluice adds to every answer of a call, besides the providers' own rate-limit names.
const (
	headerBudgetRemaining = "X-Sluice-Budget-Remaining"
	headerBudgetReset     = "X-Sluice-Budget-Reset"
	// headerDegradedModel names the cheaper model a call was sent to because the tenant's budget
	// ran low.
	headerDegradedModel = "X-Sluice-Degraded-Model"
)

// setLimitHeaders writes the rate-limit headers a provider would send, for the tightest of the
// caller's limits on requests and on tokens, and the tenant's budget left with its reset time.
func setLimitHeaders(h http.Header, c *call) {
	setDimensionHeaders(h, c, ratelimit.Requests, requestsHeaders)
	setDimensionHeaders(h, c, ratelimit.Tokens, tokensHeaders)
	budget := c.caller.Tenant.Budget(c.route.Provider.Name)
	if budget == nil {
		return
	}
	for i, check := range c.checks {
		if check.Limit.Key == budget.Key {
			h.Set(headerBudgetRemaining, string(gatewayv1.MoneyFromMicro(c.decision.Remaining[i])))
			h.Set(headerBudgetReset, time.Now().Add(c.decision.Reset[i]).UTC().Format(time.RFC3339))
			return
		}
	}
}

// dimensionHeaders are the names of x-ratelimit-{limit,remaining,reset}-<dimension>, in their
// canonical form, so that setting them does not build the names again.
type dimensionHeaders struct{ limit, remaining, reset string }

var (
	requestsHeaders = dimensionHeaders{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"}
	tokensHeaders   = dimensionHeaders{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}
)

// setDimensionHeaders writes the headers named for the caller's own check (user, tenant or
// endpoint) of dimension d with the least left.
func setDimensionHeaders(h http.Header, c *call, d ratelimit.Dimension, names dimensionHeaders) {
	tightest := -1
	for i, check := range c.checks {
		if check.Limit.Level >= ratelimit.LevelGlobal {
			continue // shared with other tenants: not the caller's to see
		}
		if check.Limit.Dimension == d && (tightest < 0 || c.decision.Remaining[i] < c.decision.Remaining[tightest]) {
			tightest = i
		}
	}
	if tightest < 0 {
		return
	}
	h.Set(names.limit, strconv.FormatInt(c.checks[tightest].Limit.Capacity(), 10))
	h.Set(names.remaining, strconv.FormatInt(c.decision.Remaining[tightest], 10))
	h.Set(names.reset, c.decision.Reset[tightest].Round(time.Millisecond).String())
}
