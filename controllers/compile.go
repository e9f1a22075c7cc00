package controllers

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// ConfigFile is the item of the configuration Secret that holds the gateway
// configuration; the gateways read it with --config.
const ConfigFile = "config.yaml"

// maxMessage caps a condition's message: a plan of a hundred tenants without
// keys says so a hundred times.
const maxMessage = 1024

// KeyFile returns the item of the configuration Secret, and so the file
// beside config.yaml, that holds a provider's API key.
func KeyFile(provider string) string {
	return provider + ".key"
}

// Inputs are what one gateway configuration is compiled from: the objects of
// one namespace.
type Inputs struct {
	// Base carries what no object holds: the server settings, the store and
	// the global limits. Its providers, plans, tenants and tenantFiles are
	// ignored. Nil means the defaults: an in-memory store and no global
	// limits.
	Base *gatewayv1.Config
	// ProviderQuotas are every ProviderQuota of the namespace.
	ProviderQuotas []v1alpha1.ProviderQuota
	// TenantPlans are every TenantPlan of the namespace.
	TenantPlans []v1alpha1.TenantPlan
	// Secrets are the namespace's Secrets: the tenants' key Secrets (labelled
	// v1alpha1.LabelTenant) and those the ProviderQuotas reference. Others
	// are ignored.
	Secrets []corev1.Secret
	// ReadyPods are, by ProviderQuota name, the addresses of the ready Pods
	// that each self-hosted ProviderQuota selects (see ReadyPodIPs). A
	// self-hosted ProviderQuota missing here has none.
	ReadyPods map[string][]string
	// SelectedPods count, by ProviderQuota name, the Pods each self-hosted
	// ProviderQuota selects, ready or not, but for those stopping (see
	// SelectedPodCounts): none means its workload is scaled to zero. A
	// self-hosted ProviderQuota missing here selects none.
	SelectedPods map[string]int32
}

// Output is a compiled gateway configuration and what became of each object.
type Output struct {
	// Config is defaulted and valid. It holds tenants' keys only as hashes,
	// and each TenantPlan's terms once, as a plan its tenants name.
	Config *gatewayv1.Config
	// KeyFiles are the providers' API keys by file name (see KeyFile), to
	// be written beside config.yaml. They are secrets.
	KeyFiles map[string][]byte
	// ProviderQuotas hold a result for every ProviderQuota, by name.
	ProviderQuotas map[string]ProviderResult
	// TenantPlans hold a result for every TenantPlan, by name.
	TenantPlans map[string]PlanResult
}

// Result is what compiling did with one object: the reason of its Ready
// condition, and a message for a person that never quotes a secret.
type Result struct {
	// Reason is v1alpha1.ReasonCompiled or one of the other Reason
	// constants.
	Reason string
	// Message says what was compiled, or what to fix.
	Message string
}

// Ready reports whether the object is wholly in the configuration.
func (r Result) Ready() bool {
	return r.Reason == v1alpha1.ReasonCompiled
}

// ProviderResult is what compiling did with one ProviderQuota.
type ProviderResult struct {
	Result
	// EffectiveLimits are the limits the gateways enforce, after headroom.
	// Nil means the provider is not in the configuration.
	EffectiveLimits *v1alpha1.ProviderLimits
	// ReadyPods and ReadyGPUs are what a self-hosted provider's capacity
	// was counted from; nil for a hosted one.
	ReadyPods, ReadyGPUs *int32
	// Active is the reason and message of a self-hosted provider's Active
	// condition (v1alpha1.ReasonPodsReady or ReasonNoReadyPods); nil for a
	// hosted one.
	Active *Result
}

// PlanResult is what compiling did with one TenantPlan. A plan whose own
// spec cannot be compiled is left out whole; a tenant without keys, or
// covered by an older plan, is left out alone.
type PlanResult struct {
	Result
	// Tenants hold one entry per spec.tenants, in its order.
	Tenants []TenantResult
}

// TenantResult is what compiling did with one tenant of a plan.
type TenantResult struct {
	// Name is the tenant's name.
	Name string
	// Keys counts the tenant's usable key Secrets.
	Keys int32
	// Compiled reports whether the tenant is in the configuration.
	Compiled bool
}

// TenantCount counts the plan's tenants in the configuration.
func (r PlanResult) TenantCount() int32 {
	var n int32
	for _, t := range r.Tenants {
		if t.Compiled {
			n++
		}
	}
	return n
}

// problem is why an object, or part of one, is not in the configuration.
type problem struct {
	reason, message string
}

func (p *problem) result() Result {
	return Result{Reason: p.reason, Message: p.message}
}

// Compile turns the objects of one namespace into one gateway configuration.
// Each object that cannot be compiled is left out with a reason, and the rest
// compile without it. Where two objects claim the same model, tenant or key,
// the older one keeps it (the name breaks ties), whether or not it compiles,
// so that the answer does not flip as objects come and go. The error is for a
// configuration that fails validation all the same, which means an invalid
// Base or a bug here.
func Compile(in Inputs) (*Output, error) {
	c := newCompiler(in)
	for _, pq := range olderFirst(in.ProviderQuotas) {
		c.addProvider(pq)
	}
	for _, tp := range olderFirst(in.TenantPlans) {
		c.addPlan(tp)
	}
	return c.finish()
}

// compiler holds the state of one Compile.
type compiler struct {
	secrets      map[string]*corev1.Secret
	keySecretsOf map[string][]*corev1.Secret   // by tenant label, by name
	readyPods    map[string][]string           // Pod IPs, by ProviderQuota name
	selectedPods map[string]int32              // Pods ready or not, by ProviderQuota name
	quotas       map[string]bool               // every ProviderQuota's name
	providers    map[string]gatewayv1.Provider // the compiled ones
	modelClaims  map[string][]modelClaim       // a model's name or alias → the ProviderQuotas of its pool, oldest first
	tenantOwner  map[string]string             // tenant → the TenantPlan that claimed it
	planned      map[string]bool               // the TenantPlans in the configuration's plans
	keyOwner     map[string]string             // key hash → the Secret that holds it
	cfg          *gatewayv1.Config
	out          *Output
}

func newCompiler(in Inputs) *compiler {
	c := &compiler{
		secrets: map[string]*corev1.Secret{}, readyPods: in.ReadyPods, selectedPods: in.SelectedPods, quotas: map[string]bool{}, providers: map[string]gatewayv1.Provider{},
		modelClaims: map[string][]modelClaim{}, tenantOwner: map[string]string{}, keyOwner: map[string]string{}, planned: map[string]bool{},
		cfg: baseConfig(in.Base),
		out: &Output{
			KeyFiles:       map[string][]byte{},
			ProviderQuotas: map[string]ProviderResult{},
			TenantPlans:    map[string]PlanResult{},
		},
	}
	c.keySecretsOf = map[string][]*corev1.Secret{}
	for i := range in.Secrets {
		s := &in.Secrets[i]
		c.secrets[s.Name] = s
		if tenant := s.Labels[v1alpha1.LabelTenant]; tenant != "" {
			c.keySecretsOf[tenant] = append(c.keySecretsOf[tenant], s)
		}
	}
	for _, pq := range in.ProviderQuotas {
		c.quotas[pq.Name] = true
	}
	return c
}

// baseConfig copies what Base carries, so that defaulting never writes
// into the caller's Config.
func baseConfig(base *gatewayv1.Config) *gatewayv1.Config {
	cfg := &gatewayv1.Config{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind}
	if base == nil {
		return cfg
	}
	cfg.Server, cfg.Store, cfg.Jobs, cfg.Batches, cfg.Global = base.Server, base.Store, base.Jobs, base.Batches, slices.Clone(base.Global)
	if base.Store.Redis != nil {
		cfg.Store.Redis = base.Store.Redis.Copy()
	}
	return cfg
}

// olderFirst returns pointers to the objects, the oldest first and then by
// name: the order in which they claim models, tenants and keys.
func olderFirst[T any, PT interface {
	*T
	metav1.Object
}](objs []T) []PT {
	out := make([]PT, len(objs))
	for i := range objs {
		out[i] = PT(&objs[i])
	}
	slices.SortFunc(out, func(a, b PT) int {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		if c := ta.Time.Compare(tb.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.GetName(), b.GetName())
	})
	return out
}

func (c *compiler) finish() (*Output, error) {
	c.cfg.Providers = sortedValues(c.providers)
	byName := func(a, b gatewayv1.Tenant) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(c.cfg.Plans, byName)
	slices.SortFunc(c.cfg.Tenants, byName)
	c.cfg.Default()
	if err := c.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("controllers: compiled configuration is invalid: %w", err)
	}
	c.out.Config = c.cfg
	return c.out, nil
}

func sortedValues(m map[string]gatewayv1.Provider) []gatewayv1.Provider {
	out := make([]gatewayv1.Provider, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b gatewayv1.Provider) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// addProvider compiles one ProviderQuota, or records why it cannot be.
func (c *compiler) addProvider(pq *v1alpha1.ProviderQuota) {
	p := toProvider(pq)
	if sh := pq.Spec.SelfHosted; sh != nil {
		p.Endpoints = podEndpoints(c.readyPods[pq.Name], sh.Port)
		p.Paused = len(p.Endpoints) == 0 // until selfHostedResult counts the capacity
	}
	p.Default()
	conflict := c.claimModels(pq.Name, p.Models)
	key, prob := c.checkProvider(pq, &p, conflict)
	if prob != nil {
		c.out.ProviderQuotas[pq.Name] = ProviderResult{Result: prob.result()}
		return
	}
	if key != nil {
		c.out.KeyFiles[p.APIKeyFile] = key
	}
	res := ProviderResult{Result: Result{
		Reason:  v1alpha1.ReasonCompiled,
		Message: fmt.Sprintf("In the gateway configuration, serving %s.", countOf(len(p.Models), "model")),
	}}
	if sh := pq.Spec.SelfHosted; sh != nil {
		res = selfHostedResult(res, capacityOf(sh, int32(len(p.Endpoints)), p.MaxInFlight), c.selectedPods[pq.Name], &p)
	}
	res.EffectiveLimits = effectiveLimits(&p)
	c.providers[p.Name] = p
	c.out.ProviderQuotas[pq.Name] = res
}

// podEndpoints are the base URLs of a self-hosted provider's ready Pods, at
// their addresses: the gateways call each Pod itself, which lets them cap it
// at its own capacity, where a Service would spread connections, not calls.
func podEndpoints(ips []string, port int32) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = "http://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + "/v1"
	}
	return out
}

// capacity is what a self-hosted provider's ready Pods can serve.
type capacity struct {
	pods, gpus  int32
	maxInFlight int64
}

// capacityOf counts a self-hosted provider's capacity: its ready GPUs
// (readyPods × gpusPerPod, no more than gpuQuota) × maxConcurrencyPerGPU
// calls in flight, no more than limit unless limit is 0 (unlimited).
func capacityOf(sh *v1alpha1.SelfHosted, readyPods int32, limit int64) capacity {
	gpus := int64(max(readyPods, 0)) * int64(max(sh.GPUsPerPod, 1))
	if sh.GPUQuota != nil {
		gpus = min(gpus, int64(*sh.GPUQuota))
	}
	gpus = min(gpus, math.MaxInt32)
	inFlight := gpus * int64(sh.MaxConcurrencyPerGPU)
	if limit > 0 {
		inFlight = min(inFlight, limit)
	}
	return capacity{pods: max(readyPods, 0), gpus: int32(gpus), maxInFlight: inFlight}
}

// selfHostedResult sets p's in-flight cap to what the ready Pods serve, or
// pauses p when they serve nothing (a cap of 0 would mean unlimited), and
// says so in the result's Active: ScaledToZero when no Pod is selected at
// all, NoReadyPods when selected Pods are not ready.
func selfHostedResult(res ProviderResult, c capacity, selected int32, p *gatewayv1.Provider) ProviderResult {
	res.ReadyPods, res.ReadyGPUs = &c.pods, &c.gpus
	p.MaxInFlight, p.Paused = c.maxInFlight, c.maxInFlight == 0
	switch {
	case p.Paused && selected == 0:
		res.Active = &Result{Reason: v1alpha1.ReasonScaledToZero,
			Message: "No Pod is selected: its workload is scaled to zero. The gateways hold its calls in their queue, whose depth its autoscaler reads, until a Pod is ready."}
		return res
	case p.Paused:
		res.Active = &Result{Reason: v1alpha1.ReasonNoReadyPods,
			Message: fmt.Sprintf("No selected Pod is ready (%s selected): the gateways hold its calls in their queue until one is.", countOf(int(selected), "Pod"))}
		return res
	}
	res.Active = &Result{Reason: v1alpha1.ReasonPodsReady, Message: fmt.Sprintf("%s ready with %s: at most %d calls in flight.",
		countOf(int(c.pods), "Pod"), countOf(int(c.gpus), "GPU"), p.WithHeadroom(c.maxInFlight))}
	return res
}

// modelClaim is a ProviderQuota's entry of a model, under one of the model's names.
type modelClaim struct {
	owner string
	model gatewayv1.Model
}

// claimModels joins the ProviderQuota owner to the pool of each of its models, and returns a
// problem naming the models it may not pool with an older ProviderQuota (see
// gatewayv1.PoolConflict): then it claims none.
func (c *compiler) claimModels(owner string, models []gatewayv1.Model) *problem {
	var taken []string
	claims := map[string]modelClaim{}
	for _, m := range models {
		for k, name := range append([]string{m.Name}, m.Aliases...) {
			if _, twice := claims[name]; twice {
				taken = append(taken, fmt.Sprintf("%q (named twice in this ProviderQuota)", name))
			} else if why := c.poolConflict(name, k == 0, &m); why != "" {
				taken = append(taken, why)
			}
			claims[name] = modelClaim{owner, m}
		}
	}
	if len(taken) > 0 {
		return &problem{v1alpha1.ReasonModelConflict,
			fmt.Sprintf("Models that may not pool with an older ProviderQuota's: %s. A model's providers must count its calls alike.", strings.Join(taken, ", "))}
	}
	for name, claim := range claims {
		c.modelClaims[name] = append(c.modelClaims[name], claim)
	}
	return nil
}

// poolConflict says why model m, under name (its own name when isName, else an alias), may not
// join the pool an older ProviderQuota started, or returns "".
func (c *compiler) poolConflict(name string, isName bool, m *gatewayv1.Model) string {
	claims := c.modelClaims[name]
	if len(claims) == 0 {
		return ""
	}
	first := claims[0]
	switch {
	case !isName && first.model.Name != m.Name:
		return fmt.Sprintf("%q (names %q in ProviderQuota %q)", name, first.model.Name, first.owner)
	case isName:
		if why := gatewayv1.PoolConflict(&first.model, m); why != "" {
			return fmt.Sprintf("%q (%s as in ProviderQuota %q)", name, why, first.owner)
		}
	}
	return ""
}

// servesModel reports whether one of providers serves model.
func (c *compiler) servesModel(providers []string, model string) bool {
	return slices.ContainsFunc(c.modelClaims[model], func(cl modelClaim) bool { return slices.Contains(providers, cl.owner) })
}

// checkProvider returns the provider's API key, or the first reason it cannot
// be compiled: its spec, then a model conflict, then its key.
func (c *compiler) checkProvider(pq *v1alpha1.ProviderQuota, p *gatewayv1.Provider, conflict *problem) ([]byte, *problem) {
	if prob := validateQuota(pq, p); prob != nil {
		return nil, prob
	}
	if conflict != nil {
		return nil, conflict
	}
	ref := pq.Spec.APIKeySecretRef
	if ref == nil {
		return nil, nil
	}
	if s, ok := c.secrets[ref.Name]; ok && s.Labels[v1alpha1.LabelProvider] != pq.Name {
		return nil, &problem{v1alpha1.ReasonKeySecretMissing, fmt.Sprintf("Secret %q is not labelled %s=%s: label it to let this ProviderQuota send it to its provider.",
			ref.Name, v1alpha1.LabelProvider, pq.Name)}
	}
	return c.secretItem(ref.Name, cmp.Or(ref.Key, v1alpha1.KeySecretItem))
}

// secretItem returns an item of a Secret, or a problem that names what is
// missing and never what is there.
func (c *compiler) secretItem(name, item string) ([]byte, *problem) {
	s, ok := c.secrets[name]
	if !ok {
		return nil, &problem{v1alpha1.ReasonKeySecretMissing, fmt.Sprintf("Secret %q not found.", name)}
	}
	v, ok := s.Data[item]
	if !ok {
		return nil, &problem{v1alpha1.ReasonKeySecretMissing, fmt.Sprintf("Secret %q has no item %q.", name, item)}
	}
	if len(strings.TrimSpace(string(v))) == 0 {
		return nil, &problem{v1alpha1.ReasonKeySecretMissing, fmt.Sprintf("Item %q of Secret %q is empty.", item, name)}
	}
	return v, nil
}

// validateQuota checks what admission lets through but the gateways would
// refuse, such as a spend cap past the largest amount, and a self-hosted
// provider's selector. p is the defaulted provider compiled from pq.
func validateQuota(pq *v1alpha1.ProviderQuota, p *gatewayv1.Provider) *problem {
	errs := gatewayv1.ValidateProvider(providerPaths(pq), p)
	if sh := pq.Spec.SelfHosted; sh != nil {
		_, selErrs := selectorAt(specPath.Child("selfHosted", "selector"), &sh.Selector)
		errs = append(errs, selErrs...)
	}
	return invalidSpec(errs)
}

// selectorAt returns the label selector s, held at path p, as a
// labels.Selector, or why it cannot be one.
func selectorAt(p *field.Path, s *metav1.LabelSelector) (labels.Selector, field.ErrorList) {
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing(), field.ErrorList{field.Invalid(p, field.OmitValueType{}, err.Error())}
	}
	return selector, nil
}

// invalidSpec returns errs as an InvalidSpec problem, or nil if there are
// none.
func invalidSpec(errs field.ErrorList) *problem {
	if len(errs) == 0 {
		return nil
	}
	return &problem{v1alpha1.ReasonInvalidSpec, "The spec cannot be compiled: " + errs.ToAggregate().Error()}
}

// addPlan compiles one TenantPlan's tenants, or records why it cannot.
func (c *compiler) addPlan(tp *v1alpha1.TenantPlan) {
	owners := c.claimTenants(tp)
	selector, prob := keySelector(tp)
	if prob == nil {
		prob = c.checkPlan(tp)
	}
	var probs []*problem
	if prob != nil {
		probs = append(probs, prob)
	}
	res := PlanResult{}
	for _, name := range tp.Spec.Tenants {
		tr, tprobs := c.addTenant(tp, name, owners[name], selector, prob == nil)
		res.Tenants = append(res.Tenants, tr)
		probs = append(probs, tprobs...)
	}
	res.Result = planResult(&res, probs)
	c.out.TenantPlans[tp.Name] = res
}

// claimTenants gives the plan every tenant no older plan claimed, and
// returns each tenant's owner.
func (c *compiler) claimTenants(tp *v1alpha1.TenantPlan) map[string]string {
	owners := map[string]string{}
	for _, t := range tp.Spec.Tenants {
		if _, ok := c.tenantOwner[t]; !ok {
			c.tenantOwner[t] = tp.Name
		}
		owners[t] = c.tenantOwner[t]
	}
	return owners
}

// keySelector returns the selector the plan's key Secrets must match
// besides the tenant label.
func keySelector(tp *v1alpha1.TenantPlan) (labels.Selector, *problem) {
	if tp.Spec.KeySecretSelector == nil {
		return labels.Everything(), nil
	}
	selector, errs := selectorAt(specPath.Child("keySecretSelector"), tp.Spec.KeySecretSelector)
	return selector, invalidSpec(errs)
}

// checkPlan returns why the plan cannot be compiled at all, if it cannot.
func (c *compiler) checkPlan(tp *v1alpha1.TenantPlan) *problem {
	if prob := c.checkPlanProviders(tp); prob != nil {
		return prob
	}
	if prob := c.checkDegrade(tp); prob != nil {
		return prob
	}
	return c.validatePlan(tp)
}

// checkPlanProviders refuses a plan naming a provider that is not in the
// configuration.
func (c *compiler) checkPlanProviders(tp *v1alpha1.TenantPlan) *problem {
	var missing []string
	for _, name := range tp.Spec.Providers {
		_, compiled := c.providers[name]
		switch {
		case !c.quotas[name]:
			missing = append(missing, fmt.Sprintf("ProviderQuota %q not found", name))
		case !compiled:
			missing = append(missing, fmt.Sprintf("ProviderQuota %q is not Ready", name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &problem{v1alpha1.ReasonUnknownProvider, strings.Join(missing, "; ") + "."}
}

// checkDegrade refuses a plan whose degrade names a model none of its
// providers serves.
func (c *compiler) checkDegrade(tp *v1alpha1.TenantPlan) *problem {
	d := tp.Spec.Degrade
	if d == nil {
		return nil
	}
	for _, model := range []string{d.Model, d.Fallback} {
		if !c.servesModel(tp.Spec.Providers, model) {
			return &problem{v1alpha1.ReasonUnknownModel, fmt.Sprintf("Degrade names model %q, which none of the plan's providers serves.", model)}
		}
	}
	return nil
}

// validatePlan checks the plan's terms as the gateways check each of its
// tenants', with the providers the plan names. Its tenants' names and keys
// are checked as they are compiled.
func (c *compiler) validatePlan(tp *v1alpha1.TenantPlan) *problem {
	t := toTenant(tp)
	t.Default()
	providers := make([]gatewayv1.Provider, 0, len(t.Providers))
	for _, name := range t.Providers {
		providers = append(providers, c.providers[name])
	}
	return invalidSpec(gatewayv1.ValidateTenantTerms(specPath, &t, providers))
}

// addTenant compiles one tenant of a plan, if planOK. The tenant's keys are
// counted either way.
func (c *compiler) addTenant(tp *v1alpha1.TenantPlan, name, owner string, selector labels.Selector, planOK bool) (TenantResult, []*problem) {
	if owner != tp.Name {
		return TenantResult{Name: name}, []*problem{{v1alpha1.ReasonTenantConflict,
			fmt.Sprintf("Tenant %q is covered by the older TenantPlan %q.", name, owner)}}
	}
	keys, probs := c.tenantKeys(name, selector)
	tr := TenantResult{Name: name, Keys: int32(len(keys))}
	if !planOK {
		return tr, nil
	}
	keys, dups := c.claimKeys(keys)
	probs = append(probs, dups...)
	if len(keys) == 0 {
		return tr, append(probs, &problem{v1alpha1.ReasonKeySecretMissing,
			fmt.Sprintf("Tenant %q has no key Secret (a Secret labelled %s=%s with an %s item).", name, v1alpha1.LabelTenant, name, v1alpha1.KeySecretItem)})
	}
	c.addPlanTerms(tp)
	c.cfg.Tenants = append(c.cfg.Tenants, gatewayv1.Tenant{Name: name, UID: tenantUID(tp, name), Keys: hashes(keys), Plan: tp.Name})
	tr.Compiled = true
	return tr, probs
}

// addPlanTerms writes the plan's terms into the configuration's plans, once,
// under the plan's name: its tenants name it rather than carry a copy each.
func (c *compiler) addPlanTerms(tp *v1alpha1.TenantPlan) {
	if c.planned[tp.Name] {
		return
	}
	c.planned[tp.Name] = true
	terms := toTenant(tp)
	terms.Name = tp.Name
	c.cfg.Plans = append(c.cfg.Plans, terms)
}

// tenantUID identifies a plan's tenant for as long as both exist: a tenant deleted and created
// again, or moved to another plan, is another tenant, which does not see the jobs of the first.
func tenantUID(tp *v1alpha1.TenantPlan, name string) string {
	if tp.UID == "" {
		return ""
	}
	return string(tp.UID) + "/" + name
}

// tenantKey is one tenant key read from its Secret.
type tenantKey struct {
	secret, user, hash string
}

// tenantKeys returns the keys of a tenant's key Secrets, by Secret name,
// and a problem for each such Secret without a key.
func (c *compiler) tenantKeys(tenant string, selector labels.Selector) ([]tenantKey, []*problem) {
	var keys []tenantKey
	var probs []*problem
	for _, s := range c.keySecrets(tenant, selector) {
		v, prob := c.secretItem(s.Name, v1alpha1.KeySecretItem)
		if prob != nil {
			probs = append(probs, prob)
			continue
		}
		key := strings.TrimSpace(string(v))
		if len(key) < v1alpha1.MinKeyLength {
			probs = append(probs, &problem{v1alpha1.ReasonKeyTooShort, fmt.Sprintf("The key in Secret %q is shorter than %d characters; it is left out.", s.Name, v1alpha1.MinKeyLength)})
			continue
		}
		user := cmp.Or(s.Labels[v1alpha1.LabelUser], s.Name)
		keys = append(keys, tenantKey{secret: s.Name, user: user, hash: gatewayv1.HashKey(key)})
	}
	return keys, probs
}

// keySecrets returns a tenant's key Secrets by name.
func (c *compiler) keySecrets(tenant string, selector labels.Selector) []*corev1.Secret {
	var out []*corev1.Secret
	for _, s := range c.keySecretsOf[tenant] {
		if selector.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Secret) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// claimKeys keeps the keys no compiled tenant holds yet, and returns a
// problem for each it drops. A key must name one tenant and user.
func (c *compiler) claimKeys(keys []tenantKey) ([]tenantKey, []*problem) {
	var kept []tenantKey
	var probs []*problem
	for _, k := range keys {
		if first, ok := c.keyOwner[k.hash]; ok {
			probs = append(probs, &problem{v1alpha1.ReasonKeyConflict,
				fmt.Sprintf("Secret %q holds the same key as Secret %q; it is left out.", k.secret, first)})
			continue
		}
		c.keyOwner[k.hash] = k.secret
		kept = append(kept, k)
	}
	return kept, probs
}

func hashes(keys []tenantKey) []gatewayv1.Key {
	out := make([]gatewayv1.Key, len(keys))
	for i, k := range keys {
		out[i] = gatewayv1.Key{SHA256: k.hash, User: k.user}
	}
	return out
}

// planResult sums up a plan: Compiled when nothing went wrong, else the
// first problem's reason and every problem's message.
func planResult(res *PlanResult, probs []*problem) Result {
	if len(probs) == 0 {
		return Result{Reason: v1alpha1.ReasonCompiled,
			Message: fmt.Sprintf("All %s in the gateway configuration.", countOf(len(res.Tenants), "tenant"))}
	}
	msgs := make([]string, len(probs))
	for i, p := range probs {
		msgs[i] = p.message
	}
	msg := fmt.Sprintf("%d of %s in the gateway configuration. %s", res.TenantCount(), countOf(len(res.Tenants), "tenant"), strings.Join(msgs, " "))
	return Result{Reason: probs[0].reason, Message: msg}
}

func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
