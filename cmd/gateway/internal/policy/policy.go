// Package policy compiles a gateway configuration for the request path: tenants' keys by hash,
// models by name, and every limit built once as a ratelimit.Limit, so that a request only looks
// things up and adds up its checks.
//
// A tenant's limits (its users', its own, its budget and its endpoints') and the global limits are
// totals over every provider: a call to any provider takes from the same keys. Only a provider's
// own limits are per provider. Every key starts with a Redis Cluster hash tag: the tenant's
// ("{tenant:acme}:user:alice:requests:day"), the global one ("{sluice:global}:requests:minute") or
// the provider's ("{openai}:provider:inflight"), so that a call's checks lie in at most three
// slots and a tenant's keys in one (see ratelimit.Redis for how a decision spans them).
package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Policy is one configuration, compiled. It is immutable and safe for concurrent use; a reload
// compiles a new one.
type Policy struct {
	// Config is the configuration the policy was compiled from.
	Config *gatewayv1.Config
	// Replicas is how many gateways share the configuration's limits, as compiled: at least 1.
	Replicas int64

	callers   map[string]*Caller   // by the key's SHA-256, hex
	routes    map[string][]*Route  // a model's pool, by the model's name or alias
	providers map[string]*Provider // by name
	tenants   []*Tenant
	byName    map[string]*Tenant
	scopes    map[string]*Scope // the scopes with calendar windows, by name
}

// Caller is the tenant and user an API key belongs to.
type Caller struct {
	Tenant *Tenant
	User   string
	limits []rule // perUser, over every provider
}

// Tenant is one tenant's plan, compiled.
type Tenant struct {
	Name     string
	Config   *gatewayv1.Tenant
	Location *time.Location

	providers map[string]bool
	// The tenant's limits, each a total over every provider.
	limits    []rule                        // perTenant and the budget
	endpoints map[gatewayv1.Endpoint][]rule // per endpoint
	budget    *ratelimit.Limit              // nil without a budget
	scope     *Scope                        // its calendar windows', its users' too; nil without
}

// Provider is one upstream account, compiled.
type Provider struct {
	Name   string
	Config *gatewayv1.Provider
	// Endpoints are where calls go, the path after /v1 appended to one of them: the
	// configuration's baseURL alone, or a self-hosted provider's Pods. None when the provider is
	// paused without Pods.
	Endpoints []*url.URL
	// APIKey is the provider's key, read from the configured file; empty when none is configured.
	APIKey string
	// Learned are the limits the provider reported lower than configured, which its rolling
	// windows hold to in place of the configured ones. Zero fields mean none lower.
	Learned gatewayv1.LearnedLimits

	// Pooled are the other providers that serve one of its models, each once, in the
	// configuration's order: those whose queued calls it may send (see package admission).
	Pooled []string

	limits []rule   // the global limits, shared by every provider, then the provider's own
	scopes []*Scope // the global calendar windows' scope and its own, where they have any
}

// Route is where a model's calls go, and what they cost there.
type Route struct {
	Provider *Provider
	Model    *gatewayv1.Model
	// Prices are the model's own prices when it has them, else its provider's, read once.
	Prices gatewayv1.MicroPrices
}

// Compile builds the policy of a validated configuration, reading the providers' key files.
// replicas is the number of gateway replicas that share the configuration's budgets; it sizes
// the local limits used when Redis is unreachable and the store fails open.
func Compile(cfg *gatewayv1.Config, replicas int64) (*Policy, error) {
	return CompileLearned(cfg, replicas, nil)
}

// CompileLearned is Compile with each provider's per-minute limits lowered to the limits learned
// from its answers (by provider name), where they are lower and above their floor:
// see Lower.
func CompileLearned(cfg *gatewayv1.Config, replicas int64, learned map[string]gatewayv1.LearnedLimits) (*Policy, error) {
	p := &Policy{
		Config:    cfg,
		Replicas:  max(replicas, 1),
		callers:   map[string]*Caller{},
		routes:    map[string][]*Route{},
		providers: map[string]*Provider{},
		byName:    map[string]*Tenant{},
		scopes:    map[string]*Scope{},
	}
	b := builder{replicas: max(replicas, 1)}
	globals, err := b.rules(globalKey, ratelimit.LevelGlobal, cfg.Global, time.UTC)
	if err != nil {
		return nil, err
	}
	record := recordByScope(cfg.Record)
	global := p.addScope(newScope(globalScope, ratelimit.LevelGlobal, record, globals))
	for i := range cfg.Providers {
		pc := &cfg.Providers[i]
		if err := p.addProvider(&b, pc, Lower(pc, learned[pc.Name], gatewayv1.LearnedLimits{}), globals, global, record); err != nil {
			return nil, err
		}
	}
	p.linkPools()
	for i := range cfg.Tenants {
		if err := p.addTenant(&b, &cfg.Tenants[i], record); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// linkPools tells each provider the others that serve one of its models.
func (p *Policy) linkPools() {
	for _, pr := range p.Providers() {
		for _, m := range pr.Config.Models {
			for _, r := range p.routes[m.Name] {
				if r.Provider != pr && !slices.Contains(pr.Pooled, r.Provider.Name) {
					pr.Pooled = append(pr.Pooled, r.Provider.Name)
				}
			}
		}
	}
}

// addProvider compiles a provider, pacing to the limits it reported lower than cfg's; globals
// are the global limits, which every provider's calls take from.
func (p *Policy) addProvider(b *builder, cfg *gatewayv1.Provider, learned gatewayv1.LearnedLimits, globals []rule, global *Scope, record map[string]gatewayv1.ScopeRecord) error {
	endpoints, err := parseEndpoints(cfg)
	if err != nil {
		return err
	}
	key, err := ReadSecret(cfg.APIKeyFile)
	if err != nil {
		return fmt.Errorf("policy: provider %q: %w", cfg.Name, err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return fmt.Errorf("policy: provider %q: %w", cfg.Name, err)
	}
	limits, err := b.providerRules(cfg, paced(cfg, learned), loc)
	if err != nil {
		return err
	}
	pr := &Provider{Name: cfg.Name, Config: cfg, Endpoints: endpoints, APIKey: key, Learned: learned,
		limits: append(slices.Clip(globals), limits...)}
	for _, s := range []*Scope{global, p.addScope(newScope(cfg.Name, ratelimit.LevelProvider, record, limits))} {
		if s != nil {
			pr.scopes = append(pr.scopes, s)
		}
	}
	p.providers[cfg.Name] = pr
	for i := range cfg.Models {
		m := &cfg.Models[i]
		route := &Route{Provider: pr, Model: m, Prices: cfg.PricesOf(m).Micro()}
		for _, name := range append([]string{m.Name}, m.Aliases...) {
			p.routes[name] = append(p.routes[name], route)
		}
	}
	return nil
}

// parseEndpoints parses where a provider's calls go: its endpoints, or else its baseURL.
func parseEndpoints(cfg *gatewayv1.Provider) ([]*url.URL, error) {
	raw := cfg.Endpoints
	if len(raw) == 0 && cfg.BaseURL != "" {
		raw = []string{cfg.BaseURL}
	}
	out := make([]*url.URL, len(raw))
	for i, s := range raw {
		u, err := url.Parse(strings.TrimSuffix(s, "/"))
		if err != nil {
			return nil, fmt.Errorf("policy: provider %q: endpoint: %w", cfg.Name, err)
		}
		out[i] = u
	}
	return out, nil
}

// Lower returns the limits a provider reported that are lower than cfg's (before headroom), each
// held at or above its floor (see floor): a configured zero, unlimited, is higher than any. A
// limit it did not report (zero) is none, and so is one whose floor is the configured limit.
// served is what the provider was seen to serve (zero fields for nothing).
func Lower(cfg *gatewayv1.Provider, reported, served gatewayv1.LearnedLimits) gatewayv1.LearnedLimits {
	return reported.Combine(served, func(d gatewayv1.Dimension, reported, served int64) int64 {
		configured := cfg.PerMinute(d)
		return lowerThan(configured, floor(configured, reported, served))
	})
}

// LearnedFloorDivisor bounds what a provider's answers can teach: a learned limit is never below
// the configured one divided by it. A provider's headers are its word, and a wrong word (a bug, a
// proxy's header) must slow its calls at most a hundredfold, never stop them, while an account
// whose real limits are a fiftieth of those configured is still learned.
const LearnedFloorDivisor = 100

// floor is a reported limit held at or above its floor: the configured limit over
// LearnedFloorDivisor, rounded up, and what the provider was seen to serve. A limit not reported
// (zero) stays zero.
func floor(configured, reported, served int64) int64 {
	if reported <= 0 {
		return 0
	}
	return max(reported, (configured+LearnedFloorDivisor-1)/LearnedFloorDivisor, served)
}

// lowerThan is reported when it is a limit below configured, else zero.
func lowerThan(configured, reported int64) int64 {
	if reported > 0 && (configured == 0 || reported < configured) {
		return reported
	}
	return 0
}

// TokensTaken is what a call that provider p counts as n tokens (of l's kind) takes from l, one of
// the limits of its calls: n, but on p's own per-minute token limits while they hold a limit
// learned from its answers, no more than l ever holds. A call larger than a learned limit is no
// fault of its client (the provider's word may be wrong, or out of date): it waits until the
// limit is whole and goes as a probe, whose answer teaches again, and settling charges the rest
// of it.
func (p *Provider) TokensTaken(l *ratelimit.Limit, n int64) int64 {
	if l.Level == ratelimit.LevelProvider && l.Dimension.CountsTokens() && !l.IsWindow() && p.Learned.Of(configured(l.Dimension)) > 0 {
		return min(n, l.Largest())
	}
	return n
}

// configured is the configuration's name of a dimension of tokens or requests.
func configured(d ratelimit.Dimension) gatewayv1.Dimension {
	switch d {
	case ratelimit.Tokens:
		return gatewayv1.DimensionTokens
	case ratelimit.InputTokens:
		return gatewayv1.DimensionInputTokens
	case ratelimit.OutputTokens:
		return gatewayv1.DimensionOutputTokens
	}
	return gatewayv1.DimensionRequests
}

// paced is cfg's published limits (see gatewayv1.Provider.PublishedLimits), each per-minute one
// that was learned at its learned limit, and a limit learned that cfg does not publish added.
func paced(cfg *gatewayv1.Provider, learned gatewayv1.LearnedLimits) []gatewayv1.Limit {
	limits := cfg.PublishedLimits()
	for _, d := range gatewayv1.LearnedDimensions() {
		n := learned.Of(d)
		if n <= 0 {
			continue
		}
		i := slices.IndexFunc(limits, func(l gatewayv1.Limit) bool { return l.Dimension == d && l.Per == gatewayv1.PeriodMinute })
		if i < 0 {
			limits = append(limits, gatewayv1.Limit{Dimension: d, Amount: n, Per: gatewayv1.PeriodMinute})
		} else {
			limits[i].Amount = n
		}
	}
	return limits
}

// Limits returns the provider's own limits in force, as every gateway shares them: its rolling
// minutes, its days, its month of spend and its calls in flight. The paces beside its minutes are
// left out: how full they are says how calls are spread, not how much of a limit is used.
func (p *Provider) Limits() []*ratelimit.Limit {
	var out []*ratelimit.Limit
	for _, r := range p.limits {
		if l := r.shared; l.Level == ratelimit.LevelProvider && !l.IsBucket() {
			out = append(out, l)
		}
	}
	return out
}

// SustainedPerMinute is the units of d a minute the gateway lets through to the provider while a
// backlog lasts: the rate of its pace, 59/61 of the configured or learned limit per minute after
// headroom (see gatewayv1.ProviderPace). Zero means no limit.
func (p *Provider) SustainedPerMinute(d ratelimit.Dimension) int64 {
	name := configured(d)
	n := p.Config.WithHeadroom(cmp.Or(p.Learned.Of(name), p.Config.PerMinute(name)))
	if n <= 0 {
		return 0
	}
	rate, _ := gatewayv1.ProviderPace(n, gatewayv1.ProviderMinBurst(name))
	return rate
}

// ReadSecret reads a secret (an API key, a password) from a file of its own; an empty path is no
// secret. The error names the file, never its content.
func ReadSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the secret file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return "", fmt.Errorf("the secret file %s is empty", path)
	}
	return secret, nil
}

func (p *Policy) addTenant(b *builder, cfg *gatewayv1.Tenant, record map[string]gatewayv1.ScopeRecord) error {
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return fmt.Errorf("policy: tenant %q: %w", cfg.Name, err)
	}
	t := &Tenant{Name: cfg.Name, Config: cfg, Location: loc, providers: map[string]bool{}}
	for _, name := range cfg.Providers {
		t.providers[name] = true
	}
	if err := b.tenantRules(t); err != nil {
		return err
	}
	p.tenants = append(p.tenants, t)
	p.byName[t.Name] = t
	windows := [][]rule{t.limits}
	for _, rules := range t.endpoints {
		windows = append(windows, rules)
	}
	callers := make([]*Caller, len(cfg.Keys))
	for i, k := range cfg.Keys {
		c, err := b.caller(t, k.User)
		if err != nil {
			return err
		}
		callers[i] = c
		windows = append(windows, c.limits)
		p.callers[k.SHA256] = c
	}
	t.scope = p.addScope(newScope(tenantScope(t.Name), ratelimit.LevelTenant, record, windows...))
	for _, c := range callers {
		if err := p.checkCount(c); err != nil {
			return err
		}
	}
	return nil
}

// checkCount refuses a plan whose calls would need more checks than one decision holds.
func (p *Policy) checkCount(c *Caller) error {
	most := 0
	for _, rules := range c.Tenant.endpoints {
		most = max(most, len(rules))
	}
	for name := range c.Tenant.providers {
		pr := p.providers[name]
		n := len(c.limits) + len(c.Tenant.limits) + len(pr.limits) + len(pr.scopes)
		if c.Tenant.scope != nil {
			n++ // its mark
		}
		if n+most > ratelimit.MaxChecks {
			return fmt.Errorf("policy: tenant %q: a call to %q would pass %d limits; at most %d fit in one decision", c.Tenant.Name, name, n+most, ratelimit.MaxChecks)
		}
	}
	return nil
}

// Caller returns whose key this is, or nil for an unknown key.
func (p *Policy) Caller(apiKey string) *Caller {
	sum := sha256.Sum256([]byte(apiKey))
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return p.callers[string(hexSum[:])] // as gatewayv1.HashKey spells it; a map read makes no string of it
}

// CallerOf returns whose key has this SHA-256 (lower-case hex), or nil: a job keeps the hash of
// the key that sent it, never the key, and finds its caller by it when it runs.
func (p *Policy) CallerOf(keyHash string) *Caller { return p.callers[keyHash] }

// Routes returns where a model's calls may go, one route for each provider of its pool in the
// configuration's order, or nil for a model the configuration does not name, as a model or an
// alias. A dated snapshot of a model is another model, billed at its own prices: it is served
// only when it is configured.
func (p *Policy) Routes(model string) []*Route { return p.routes[model] }

// Provider returns a provider by name, or nil.
func (p *Policy) Provider(name string) *Provider { return p.providers[name] }

// Tenant returns a tenant by name, or nil.
func (p *Policy) Tenant(name string) *Tenant { return p.byName[name] }

// Tenants returns every tenant, in the configuration's order.
func (p *Policy) Tenants() []*Tenant { return p.tenants }

// Providers returns every provider, in the configuration's order.
func (p *Policy) Providers() []*Provider {
	out := make([]*Provider, 0, len(p.providers))
	for i := range p.Config.Providers {
		out = append(out, p.providers[p.Config.Providers[i].Name])
	}
	return out
}

// Uses reports whether the tenant may call the provider.
func (t *Tenant) Uses(provider string) bool { return t.providers[provider] }

// Models returns the models a tenant may use, each once, in the configuration's order.
func (p *Policy) Models(t *Tenant) []string {
	var models []string
	for i := range p.Config.Providers {
		pr := &p.Config.Providers[i]
		if !t.Uses(pr.Name) {
			continue
		}
		for _, m := range pr.Models {
			if !slices.Contains(models, m.Name) {
				models = append(models, m.Name)
			}
		}
	}
	return models
}

// Budget returns the tenant's budget limit, a total over every provider it uses, or nil if the
// tenant has no budget.
func (t *Tenant) Budget() *ratelimit.Limit { return t.budget }
