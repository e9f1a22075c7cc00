package controllers

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// toProvider converts a ProviderQuota's spec into the gateway's provider of
// the same name. The key is named by file (see KeyFile), never copied here.
func toProvider(pq *v1alpha1.ProviderQuota) gatewayv1.Provider {
	s := &pq.Spec
	p := gatewayv1.Provider{
		Name:              pq.Name,
		API:               gatewayv1.ProviderAPI(s.API),
		AnthropicVersion:  s.AnthropicVersion,
		BaseURL:           s.BaseURL, // empty for a self-hosted one, which compiling gives its Pods' endpoints
		Models:            toModels(s.Models, s.SelfHosted != nil),
		AdmissionCount:    gatewayv1.AdmissionCount(s.AdmissionCount),
		Batches:           gatewayv1.BatchWay(s.Batches),
		BatchQueueTokens:  s.BatchQueueTokens,
		HeadroomPercent:   s.HeadroomPercent,
		TimeZone:          s.TimeZone,
		CachedInputCounts: s.CachedInputCounts,
		OutputTokenWeight: s.OutputTokenWeight,
		Timeout:           s.Timeout,
		StallTimeout:      s.StallTimeout,
		CallTimeout:       s.CallTimeout,
	}
	if s.APIKeySecretRef != nil {
		p.APIKeyFile = KeyFile(pq.Name)
	}
	if l := s.Limits; l != nil {
		p.RequestsPerMinute, p.TokensPerMinute, p.MaxInFlight = l.RequestsPerMinute, l.TokensPerMinute, l.MaxInFlight
		p.Limits = providerLimits(l)
	}
	if s.Prices != nil {
		p.Prices = toPrices(s.Prices)
	}
	if sp := s.Spend; sp != nil {
		p.SpendPerMinute, p.SpendPerMonth = gatewayv1.Money(sp.PerMinute), gatewayv1.Money(sp.PerMonth)
	}
	if r := s.Retry; r != nil {
		p.Retry = gatewayv1.Retry{MaxAttempts: r.MaxAttempts, BaseDelay: r.BaseDelay, MaxDelay: r.MaxDelay}
	}
	if a := s.Azure; a != nil {
		p.Azure = &gatewayv1.Azure{APIVersion: a.APIVersion, Deployments: deployments(a.Deployments)}
	}
	if b := s.Breaker; b != nil {
		p.Breaker = gatewayv1.Breaker{Failures: b.Failures, OpenFor: b.OpenFor}
	}
	return p
}

// specPath is the path of a ProviderQuota's and a TenantPlan's spec, under
// which compiling reports what is wrong with one.
var specPath = field.NewPath("spec")

// providerPaths returns where pq holds each field of the provider compiled
// from it: the paths its validation errors name. A self-hosted provider's
// endpoints are its Pods', found by spec.selfHosted.
func providerPaths(pq *v1alpha1.ProviderQuota) gatewayv1.ProviderPaths {
	paths := gatewayv1.NewProviderPaths(specPath)
	paths.Name = field.NewPath("metadata", "name")
	paths.Endpoints = specPath.Child("selfHosted") // a hosted one has none
	if pq.Spec.SelfHosted != nil {
		paths.BaseURL = paths.Endpoints
	}
	limits := specPath.Child("limits")
	paths.RequestsPerMinute = limits.Child("requestsPerMinute")
	paths.TokensPerMinute = limits.Child("tokensPerMinute")
	paths.MaxInFlight = limits.Child("maxInFlight")
	paths.Limit = func(_ int, l gatewayv1.Limit) *field.Path {
		if f, ok := limitField(l.Dimension, l.Per); ok {
			return limits.Child(f.name)
		}
		return limits
	}
	paths.SpendPerMinute = specPath.Child("spend", "perMinute")
	paths.SpendPerMonth = specPath.Child("spend", "perMonth")
	return paths
}

// toModels converts a provider's models. A model that names no maxTokensParam gets max_tokens
// when its provider is self-hosted, since every engine reads it, and the gateway's default,
// max_completion_tokens, otherwise.
func toModels(models []v1alpha1.Model, selfHosted bool) []gatewayv1.Model {
	out := make([]gatewayv1.Model, len(models))
	for i, m := range models {
		param := gatewayv1.MaxTokensParam(m.MaxTokensParam)
		if param == "" && selfHosted {
			param = gatewayv1.MaxTokensParamTokens
		}
		out[i] = gatewayv1.Model{Name: m.Name, Aliases: m.Aliases, Encoding: string(m.Encoding), DefaultMaxTokens: m.DefaultMaxTokens, MaxTokensParam: param,
			ContextWindow: m.ContextWindow}
		if m.Prices != nil {
			prices := toPrices(m.Prices)
			out[i].Prices = &prices
		}
	}
	return out
}

// toPrices converts a provider's or a model's prices, its tiers' with them.
func toPrices(pr *v1alpha1.Prices) gatewayv1.Prices {
	out := gatewayv1.Prices{
		InputPerMillion:       gatewayv1.Money(pr.InputPerMillion),
		CachedInputPerMillion: gatewayv1.Money(pr.CachedInputPerMillion),
		CacheWritePerMillion:  gatewayv1.Money(pr.CacheWritePerMillion),
		AudioInputPerMillion:  gatewayv1.Money(pr.AudioInputPerMillion),
		OutputPerMillion:      gatewayv1.Money(pr.OutputPerMillion),
		AudioOutputPerMillion: gatewayv1.Money(pr.AudioOutputPerMillion),
	}
	for _, t := range pr.Tiers {
		out.Tiers = append(out.Tiers, gatewayv1.TierPrices{
			Name:                  t.Name,
			InputPerMillion:       gatewayv1.Money(t.InputPerMillion),
			CachedInputPerMillion: gatewayv1.Money(t.CachedInputPerMillion),
			CacheWritePerMillion:  gatewayv1.Money(t.CacheWritePerMillion),
			AudioInputPerMillion:  gatewayv1.Money(t.AudioInputPerMillion),
			OutputPerMillion:      gatewayv1.Money(t.OutputPerMillion),
			AudioOutputPerMillion: gatewayv1.Money(t.AudioOutputPerMillion),
		})
	}
	return out
}

// toTenant converts what a plan gives each of its tenants; the caller sets
// the name and keys.
func toTenant(tp *v1alpha1.TenantPlan) gatewayv1.Tenant {
	s := &tp.Spec
	t := gatewayv1.Tenant{
		Providers: append([]string(nil), s.Providers...),
		Priority:  gatewayv1.Priority(s.Priority),
		Weight:    s.Weight,
		PerUser:   toLimits(s.PerUser),
		PerTenant: toLimits(s.PerTenant),
		TimeZone:  s.TimeZone,
		MaxWait:   s.MaxWait,
		JobScope:  gatewayv1.JobScope(s.JobScope),

		ProviderState: gatewayv1.ProviderState(s.ProviderState),
		StoredPrompts: append([]string(nil), s.StoredPrompts...),
	}
	for _, ep := range s.Endpoints {
		t.Endpoints = append(t.Endpoints, gatewayv1.EndpointLimits{Endpoint: gatewayv1.Endpoint(ep.Endpoint), Limits: toLimits(ep.Limits)})
	}
	if b := s.Budget; b != nil {
		t.Budget = &gatewayv1.Budget{Amount: gatewayv1.Money(b.Amount), Period: gatewayv1.Period(b.Period)}
	}
	if d := s.Degrade; d != nil {
		t.Degrade = &gatewayv1.Degrade{Model: d.Model, Fallback: d.Fallback, BelowPercent: d.BelowPercent}
	}
	return t
}

func toLimits(limits []v1alpha1.Limit) []gatewayv1.Limit {
	if limits == nil {
		return nil
	}
	out := make([]gatewayv1.Limit, len(limits))
	for i, l := range limits {
		out[i] = gatewayv1.Limit{
			Dimension: gatewayv1.Dimension(l.Dimension),
			Amount:    l.Amount,
			Dollars:   gatewayv1.Money(l.Dollars),
			Per:       gatewayv1.Period(l.Per),
			Burst:     l.Burst,
			OnLimit:   gatewayv1.Behavior(l.OnLimit),
		}
	}
	return out
}

// deployments converts an Azure provider's deployments by model, or returns nil for none.
func deployments(in map[string]v1alpha1.AzureDeployment) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for model, d := range in {
		out[model] = string(d)
	}
	return out
}
