package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

const testNamespace = "sluice"

// epoch is when the oldest test object was created.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// quota returns a hosted ProviderQuota serving models, created minutes
// after epoch, whose key is in the Secret named after it.
func quota(name string, minutes int, models ...string) v1alpha1.ProviderQuota {
	pq := v1alpha1.ProviderQuota{
		ObjectMeta: objectMeta(name, minutes),
		Spec: v1alpha1.ProviderQuotaSpec{
			BaseURL:         "https://" + name + ".example/v1",
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: name, Key: v1alpha1.KeySecretItem},
		},
	}
	for _, m := range models {
		pq.Spec.Models = append(pq.Spec.Models, v1alpha1.Model{Name: m})
	}
	return pq
}

// plan returns a TenantPlan created minutes after epoch.
func plan(name string, minutes int, tenants, providers []string) v1alpha1.TenantPlan {
	return v1alpha1.TenantPlan{
		ObjectMeta: objectMeta(name, minutes),
		Spec:       v1alpha1.TenantPlanSpec{Tenants: tenants, Providers: providers},
	}
}

func objectMeta(name string, minutes int) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: testNamespace,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(minutes) * time.Minute)),
	}
}

// keySecret returns a tenant's key Secret; an empty user leaves the label
// off.
func keySecret(name, tenant, user, key string) corev1.Secret {
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{v1alpha1.LabelTenant: tenant}},
		Data:       map[string][]byte{v1alpha1.KeySecretItem: []byte(key)},
	}
	if user != "" {
		s.Labels[v1alpha1.LabelUser] = user
	}
	return s
}

// providerSecret returns a provider's API key Secret.
func providerSecret(name, key string) corev1.Secret {
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{v1alpha1.LabelProvider: name}},
		Data:       map[string][]byte{v1alpha1.KeySecretItem: []byte(key)},
	}
}

func TestCompile(t *testing.T) {
	// The modifiers work on deep copies: the fixtures below are shared.
	withItem := func(pq v1alpha1.ProviderQuota, item string) v1alpha1.ProviderQuota {
		c := pq.DeepCopy()
		c.Spec.APIKeySecretRef.Key = item
		return *c
	}
	withoutKeyRef := func(pq v1alpha1.ProviderQuota) v1alpha1.ProviderQuota {
		c := pq.DeepCopy()
		c.Spec.APIKeySecretRef = nil
		return *c
	}
	withTimeZone := func(tp v1alpha1.TenantPlan, tz string) v1alpha1.TenantPlan {
		c := tp.DeepCopy()
		c.Spec.TimeZone = tz
		return *c
	}
	withDegrade := func(tp v1alpha1.TenantPlan, model, fallback string) v1alpha1.TenantPlan {
		c := tp.DeepCopy()
		c.Spec.Budget = &v1alpha1.Budget{Amount: "100", Period: v1alpha1.BudgetPeriodMonth}
		c.Spec.Degrade = &v1alpha1.Degrade{Model: model, Fallback: fallback, BelowPercent: 10}
		return *c
	}
	withSelector := func(tp v1alpha1.TenantPlan, labels map[string]string) v1alpha1.TenantPlan {
		c := tp.DeepCopy()
		c.Spec.KeySecretSelector = &metav1.LabelSelector{MatchLabels: labels}
		return *c
	}
	labelled := func(s corev1.Secret, k, v string) corev1.Secret {
		c := s.DeepCopy()
		c.Labels[k] = v
		return *c
	}
	withoutItem := func(s corev1.Secret) corev1.Secret {
		c := s.DeepCopy()
		c.Data = map[string][]byte{"other": []byte("x")}
		return *c
	}
	openai, openaiKey := quota("openai", 0, "gpt-4o", "gpt-4o-mini"), providerSecret("openai", "sk-openai")
	acmeAlice := keySecret("acme-alice", "acme", "alice", "sk-acme-alice-0123456789abcdef0123456789abcdef")
	globexBob := keySecret("globex-bob", "globex", "bob", "sk-globex-bob-0123456789abcdef0123456789abcdef")
	basic := plan("basic", 0, []string{"acme", "globex"}, []string{"openai"})

	tests := []struct {
		name          string
		in            Inputs
		wantProviders []string
		wantKeyFiles  map[string]string
		wantTenants   map[string][]gatewayv1.Key
		wantQuotas    map[string]string // name → reason
		wantPlans     map[string]string // name → reason
		wantCounts    map[string]int32  // plan → tenantCount
		wantMessages  []string          // each in some object's message
	}{{
		name:          "everything compiles",
		in:            Inputs{ProviderQuotas: []v1alpha1.ProviderQuota{openai}, TenantPlans: []v1alpha1.TenantPlan{basic}, Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob}},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants: map[string][]gatewayv1.Key{
			"acme":   {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}},
			"globex": {{SHA256: gatewayv1.HashKey("sk-globex-bob-0123456789abcdef0123456789abcdef"), User: "bob"}},
		},
		wantQuotas: map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:  map[string]string{"basic": v1alpha1.ReasonCompiled},
		wantCounts: map[string]int32{"basic": 2},
	}, {
		name: "no objects compile to an empty configuration",
		in:   Inputs{Secrets: []corev1.Secret{openaiKey, acmeAlice}},
	}, {
		name: "a provider without a key reference needs no Secret",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{withoutKeyRef(openai)},
			TenantPlans:    []v1alpha1.TenantPlan{plan("p", 0, []string{"acme"}, []string{"openai"})},
			Secrets:        []corev1.Secret{acmeAlice},
		},
		wantProviders: []string{"openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"p": v1alpha1.ReasonCompiled},
		wantCounts:    map[string]int32{"p": 1},
	}, {
		name: "a missing provider key Secret leaves out that provider and its plan only",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai, quota("anthropic", 1, "claude")},
			TenantPlans: []v1alpha1.TenantPlan{
				plan("on-openai", 0, []string{"acme"}, []string{"openai"}),
				plan("on-anthropic", 0, []string{"globex"}, []string{"anthropic"}),
			},
			Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled, "anthropic": v1alpha1.ReasonKeySecretMissing},
		wantPlans:     map[string]string{"on-openai": v1alpha1.ReasonCompiled, "on-anthropic": v1alpha1.ReasonUnknownProvider},
		wantCounts:    map[string]int32{"on-openai": 1, "on-anthropic": 0},
		wantMessages:  []string{`Secret "anthropic" not found.`, `ProviderQuota "anthropic" is not Ready.`},
	}, {
		name:         "a provider key Secret without the named item",
		in:           Inputs{ProviderQuotas: []v1alpha1.ProviderQuota{withItem(openai, "token")}, Secrets: []corev1.Secret{openaiKey}},
		wantQuotas:   map[string]string{"openai": v1alpha1.ReasonKeySecretMissing},
		wantMessages: []string{`Secret "openai" has no item "token".`},
	}, {
		name: "a provider key Secret labelled for another ProviderQuota",
		in: Inputs{ProviderQuotas: []v1alpha1.ProviderQuota{openai}, Secrets: []corev1.Secret{func() corev1.Secret {
			s := providerSecret("openai", "sk-openai")
			s.Labels[v1alpha1.LabelProvider] = "evil"
			return s
		}()}},
		wantQuotas:   map[string]string{"openai": v1alpha1.ReasonKeySecretMissing},
		wantMessages: []string{`Secret "openai" is not labelled sluice.dev/provider=openai`},
	}, {
		name:         "an empty provider key",
		in:           Inputs{ProviderQuotas: []v1alpha1.ProviderQuota{openai}, Secrets: []corev1.Secret{providerSecret("openai", " \n")}},
		wantQuotas:   map[string]string{"openai": v1alpha1.ReasonKeySecretMissing},
		wantMessages: []string{`Item "apiKey" of Secret "openai" is empty.`},
	}, {
		name: "a model two providers serve alike is pooled",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{quota("azure", 5, "gpt-4o", "o3"), openai},
			Secrets:        []corev1.Secret{openaiKey, providerSecret("azure", "sk-azure")},
		},
		wantProviders: []string{"azure", "openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai", "azure.key": "sk-azure"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled, "azure": v1alpha1.ReasonCompiled},
	}, {
		name: "a model two providers count differently stays with the older provider",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{func() v1alpha1.ProviderQuota {
				azure := quota("azure", 5, "gpt-4o", "o3")
				azure.Spec.Models[0].DefaultMaxTokens = 999
				return azure
			}(), openai},
			Secrets: []corev1.Secret{openaiKey, providerSecret("azure", "sk-azure")},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled, "azure": v1alpha1.ReasonModelConflict},
		wantMessages:  []string{`"gpt-4o" (must have the same defaultMaxTokens (256) as in ProviderQuota "openai")`},
	}, {
		name: "an alias that is another provider's model is a conflict too",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{func() v1alpha1.ProviderQuota {
				azure := quota("azure", 5, "o3")
				azure.Spec.Models[0].Aliases = []string{"gpt-4o"}
				return azure
			}(), openai},
			Secrets: []corev1.Secret{openaiKey, providerSecret("azure", "sk-azure")},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled, "azure": v1alpha1.ReasonModelConflict},
		wantMessages:  []string{`"gpt-4o" (names "gpt-4o" in ProviderQuota "openai")`},
	}, {
		name: "a plan naming an unknown provider is left out",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans: []v1alpha1.TenantPlan{
				plan("typo", 0, []string{"acme"}, []string{"openai", "opneai"}),
				plan("fine", 1, []string{"globex"}, []string{"openai"}),
			},
			Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"globex": {{SHA256: gatewayv1.HashKey("sk-globex-bob-0123456789abcdef0123456789abcdef"), User: "bob"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"typo": v1alpha1.ReasonUnknownProvider, "fine": v1alpha1.ReasonCompiled},
		wantCounts:    map[string]int32{"typo": 0, "fine": 1},
		wantMessages:  []string{`ProviderQuota "opneai" not found.`},
	}, {
		name: "a tenant without a key Secret is left out alone",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{plan("basic", 0, []string{"acme", "initech"}, []string{"openai"})},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonKeySecretMissing},
		wantCounts:    map[string]int32{"basic": 1},
		wantMessages:  []string{`1 of 2 tenants in the gateway configuration. Tenant "initech" has no key Secret`},
	}, {
		name: "a key Secret without the apiKey item is skipped and reported",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{plan("basic", 0, []string{"acme"}, []string{"openai"})},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice, withoutItem(keySecret("acme-carol", "acme", "carol", ""))},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonKeySecretMissing},
		wantCounts:    map[string]int32{"basic": 1},
		wantMessages:  []string{`Secret "acme-carol" has no item "apiKey".`},
	}, {
		name: "a tenant named by two plans stays with the older plan",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans: []v1alpha1.TenantPlan{
				plan("pro", 10, []string{"acme", "globex"}, []string{"openai"}),
				plan("free", 0, []string{"acme"}, []string{"openai"}),
			},
			Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants: map[string][]gatewayv1.Key{
			"acme":   {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}},
			"globex": {{SHA256: gatewayv1.HashKey("sk-globex-bob-0123456789abcdef0123456789abcdef"), User: "bob"}},
		},
		wantQuotas:   map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:    map[string]string{"free": v1alpha1.ReasonCompiled, "pro": v1alpha1.ReasonTenantConflict},
		wantCounts:   map[string]int32{"free": 1, "pro": 1},
		wantMessages: []string{`Tenant "acme" is covered by the older TenantPlan "free".`},
	}, {
		name: "the same key in two Secrets stays with the first",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{basic},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice, keySecret("globex-copy", "globex", "bob", "sk-acme-alice-0123456789abcdef0123456789abcdef"), globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants: map[string][]gatewayv1.Key{
			"acme":   {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}},
			"globex": {{SHA256: gatewayv1.HashKey("sk-globex-bob-0123456789abcdef0123456789abcdef"), User: "bob"}},
		},
		wantQuotas:   map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:    map[string]string{"basic": v1alpha1.ReasonKeyConflict},
		wantCounts:   map[string]int32{"basic": 2},
		wantMessages: []string{`Secret "globex-copy" holds the same key as Secret "acme-alice"`},
	}, {
		name: "a time zone admission passes but no database knows",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{withTimeZone(basic, "Mars/Olympus_Mons")},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonInvalidSpec},
		wantCounts:    map[string]int32{"basic": 0},
		wantMessages:  []string{`The spec cannot be compiled: spec.timeZone: Invalid value: "Mars/Olympus_Mons"`},
	}, {
		name: "a provider the gateways would refuse, at the paths of its ProviderQuota",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{func() v1alpha1.ProviderQuota {
				c := openai.DeepCopy()
				c.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: -1}
				c.Spec.Spend = &v1alpha1.Spend{PerMonth: "99999999999999999999"}
				return *c
			}()},
			Secrets: []corev1.Secret{openaiKey},
		},
		wantQuotas: map[string]string{"openai": v1alpha1.ReasonInvalidSpec},
		wantMessages: []string{
			"The spec cannot be compiled: [spec.limits.requestsPerMinute: Invalid value: -1: must be 0 or more, ",
			`spec.spend.perMonth: Invalid value: "99999999999999999999": must be at most`,
		},
	}, {
		name: "a plan the gateways would refuse, at the paths of its spec",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans: []v1alpha1.TenantPlan{func() v1alpha1.TenantPlan {
				c := basic.DeepCopy()
				c.Spec.PerTenant = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionDollars, Dollars: "99999999999999999999", Per: v1alpha1.PeriodDay}}
				return *c
			}()},
			Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonInvalidSpec},
		wantCounts:    map[string]int32{"basic": 0},
		wantMessages:  []string{`The spec cannot be compiled: spec.perTenant[0].dollars: Invalid value: "99999999999999999999": must be at most`},
	}, {
		name: "a plan's inFlight limit with a period, at the path of its spec",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans: []v1alpha1.TenantPlan{func() v1alpha1.TenantPlan {
				c := basic.DeepCopy()
				c.Spec.PerUser = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionInFlight, Amount: 2, Per: v1alpha1.PeriodMinute}}
				return *c
			}()},
			Secrets: []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonInvalidSpec},
		wantCounts:    map[string]int32{"basic": 0},
		wantMessages:  []string{`The spec cannot be compiled: spec.perUser[0].per: Invalid value: "minute": must be empty for inFlight`},
	}, {
		name: "degrade to a model no provider of the plan serves",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{withDegrade(basic, "gpt-4o", "claude")},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice, globexBob},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"basic": v1alpha1.ReasonUnknownModel},
		wantCounts:    map[string]int32{"basic": 0},
		wantMessages:  []string{`Degrade names model "claude"`},
	}, {
		name: "degrade between the plan's models",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{withDegrade(plan("p", 0, []string{"acme"}, []string{"openai"}), "gpt-4o", "gpt-4o-mini")},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"p": v1alpha1.ReasonCompiled},
		wantCounts:    map[string]int32{"p": 1},
	}, {
		name: "the key selector, the user label and the Secret's name",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{withSelector(plan("p", 0, []string{"acme"}, []string{"openai"}), map[string]string{"sluice.dev/plan": "p"})},
			Secrets: []corev1.Secret{
				openaiKey,
				acmeAlice, // not selected
				labelled(keySecret("acme-ci", "acme", "", "sk-ci-0123456789abcdef0123456789abcdef\n"), "sluice.dev/plan", "p"),
				labelled(keySecret("acme-bob", "acme", "bob", "sk-bob-0123456789abcdef0123456789abcdef"), "sluice.dev/plan", "p"),
			},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants: map[string][]gatewayv1.Key{"acme": {
			{SHA256: gatewayv1.HashKey("sk-bob-0123456789abcdef0123456789abcdef"), User: "bob"},
			{SHA256: gatewayv1.HashKey("sk-ci-0123456789abcdef0123456789abcdef"), User: "acme-ci"},
		}},
		wantQuotas: map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:  map[string]string{"p": v1alpha1.ReasonCompiled},
		wantCounts: map[string]int32{"p": 1},
	}, {
		name: "a key shorter than 32 characters is left out, by its Secret's name",
		in: Inputs{
			ProviderQuotas: []v1alpha1.ProviderQuota{openai},
			TenantPlans:    []v1alpha1.TenantPlan{plan("p", 0, []string{"acme"}, []string{"openai"})},
			Secrets:        []corev1.Secret{openaiKey, acmeAlice, keySecret("acme-short", "acme", "carol", "sk-0123456789abcdef0123456789a\n")},
		},
		wantProviders: []string{"openai"},
		wantKeyFiles:  map[string]string{"openai.key": "sk-openai"},
		wantTenants:   map[string][]gatewayv1.Key{"acme": {{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}}},
		wantQuotas:    map[string]string{"openai": v1alpha1.ReasonCompiled},
		wantPlans:     map[string]string{"p": v1alpha1.ReasonKeyTooShort},
		wantCounts:    map[string]int32{"p": 1},
		wantMessages:  []string{`The key in Secret "acme-short" is shorter than 32 characters`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Compile(tc.in)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if err := out.Config.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if diff := cmp.Diff(tc.wantProviders, providerNames(out.Config)); diff != "" {
				t.Errorf("providers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantKeyFiles, stringValues(out.KeyFiles)); diff != "" {
				t.Errorf("key files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTenants, tenantKeys(out.Config)); diff != "" {
				t.Errorf("tenants' keys (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantQuotas, quotaReasons(out)); diff != "" {
				t.Errorf("ProviderQuota reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPlans, planReasons(out)); diff != "" {
				t.Errorf("TenantPlan reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCounts, tenantCounts(out)); diff != "" {
				t.Errorf("tenant counts (-want +got):\n%s", diff)
			}
			all := messages(out)
			for _, want := range tc.wantMessages {
				if !strings.Contains(all, want) {
					t.Errorf("messages = %s; want one holding %q", all, want)
				}
			}
			assertNoKeys(t, out, tc.in.Secrets)
		})
	}
}

// TestCompileConverts checks every field of a fully specified provider and
// plan against the gateway configuration they must become.
func TestCompileConverts(t *testing.T) {
	pq := quota("openai", 0, "gpt-4o", "gpt-4o-mini")
	pq.Spec.Models[0].Encoding, pq.Spec.Models[0].DefaultMaxTokens = v1alpha1.EncodingO200kBase, 512
	pq.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: 1500, TokensPerMinute: 300000, MaxInFlight: 200,
		InputTokensPerMinute: 200000, OutputTokensPerMinute: 40000, RequestsPerDay: 100000, OutputTokensPerDay: 10000000}
	pq.Spec.HeadroomPercent = 95
	pq.Spec.TimeZone, pq.Spec.CachedInputCounts, pq.Spec.OutputTokenWeight = "America/Los_Angeles", ptr.To(false), 5
	pq.Spec.Prices = &v1alpha1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", AudioInputPerMillion: "40", OutputPerMillion: "10",
		AudioOutputPerMillion: "80", Tiers: []v1alpha1.TierPrices{
			{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "2.125", OutputPerMillion: "17"},
			{Name: "flex", InputPerMillion: "1.25", OutputPerMillion: "5"},
		}}
	pq.Spec.Models[1].Prices = &v1alpha1.Prices{InputPerMillion: "0.15", CachedInputPerMillion: "0.075", OutputPerMillion: "0.60"}
	pq.Spec.Spend = &v1alpha1.Spend{PerMinute: "0.50", PerMonth: "5000"}
	pq.Spec.Retry = &v1alpha1.Retry{MaxAttempts: 4, BaseDelay: metav1.Duration{Duration: time.Second}, MaxDelay: metav1.Duration{Duration: 20 * time.Second}}
	pq.Spec.Timeout = metav1.Duration{Duration: 2 * time.Minute}
	pq.Spec.StallTimeout = metav1.Duration{Duration: 90 * time.Second}
	pq.Spec.Azure = &v1alpha1.Azure{APIVersion: "2024-10-21", Deployments: map[string]v1alpha1.AzureDeployment{"gpt-4o": "prod-4o"}}
	pq.Spec.Breaker = &v1alpha1.Breaker{Failures: 3, OpenFor: metav1.Duration{Duration: 10 * time.Second}}
	llama := quota("llama", 1, "llama-3.1-8b")
	llama.Spec.BaseURL, llama.Spec.APIKeySecretRef = "", nil
	llama.Spec.SelfHosted = &v1alpha1.SelfHosted{Port: 8000, Engine: v1alpha1.EngineVLLM, MaxConcurrencyPerGPU: 16}

	tp := plan("pro", 0, []string{"acme"}, []string{"openai", "llama"})
	tp.Spec.Priority, tp.Spec.Weight = v1alpha1.PriorityBatch, 3
	tp.Spec.PerUser = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 1000, Per: v1alpha1.PeriodDay}, {Dimension: v1alpha1.DimensionInFlight, Amount: 2}}
	tp.Spec.PerTenant = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionDollars, Dollars: "5.00", Per: v1alpha1.PeriodMinute},
		{Dimension: v1alpha1.DimensionInFlight, Amount: 5, OnLimit: v1alpha1.BehaviorReject},
		{Dimension: v1alpha1.DimensionOutputTokens, Amount: 50000, Per: v1alpha1.PeriodHour}, {Dimension: v1alpha1.DimensionInputTokens, Amount: 1000000, Per: v1alpha1.PeriodDay}}
	tp.Spec.Endpoints = []v1alpha1.EndpointLimits{{Endpoint: v1alpha1.EndpointChat, Limits: []v1alpha1.Limit{
		{Dimension: v1alpha1.DimensionTokens, Amount: 20000, Per: v1alpha1.PeriodMinute, Burst: 40000, OnLimit: v1alpha1.BehaviorReject},
		{Dimension: v1alpha1.DimensionInFlight, Amount: 3},
	}}}
	tp.Spec.Budget = &v1alpha1.Budget{Amount: "5000", Period: v1alpha1.BudgetPeriodMonth}
	tp.Spec.TimeZone, tp.Spec.MaxWait = "Europe/Berlin", metav1.Duration{Duration: 10 * time.Minute}
	tp.Spec.Degrade = &v1alpha1.Degrade{Model: "gpt-4o", Fallback: "gpt-4o-mini", BelowPercent: 20}
	tp.Spec.JobScope, tp.UID = v1alpha1.JobScopeUser, "0b6e3c1e-5d0f-4e6a-9a57-2f3c8d1e7b42"
	base := &gatewayv1.Config{
		Store: gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{Address: "redis:6379", Replicas: 3,
			Username: "sluice", PasswordFile: "/etc/sluice-redis/password", TLS: &gatewayv1.RedisTLS{CAFile: "/etc/sluice-redis-ca/ca.crt", ServerName: "redis.example"}}},
		Jobs:   gatewayv1.Jobs{Workers: 4},
		Global: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 10000, Per: gatewayv1.PeriodMinute}},
	}

	out, err := Compile(Inputs{
		Base:           base,
		ProviderQuotas: []v1alpha1.ProviderQuota{pq, llama},
		TenantPlans:    []v1alpha1.TenantPlan{tp},
		Secrets:        []corev1.Secret{providerSecret("openai", "sk-openai"), keySecret("acme-alice", "acme", "alice", "sk-acme-alice-0123456789abcdef0123456789abcdef")},
		ReadyPods:      map[string][]string{"llama": {"10.0.0.1", "10.0.0.2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Server: defaultServer(),
		Store: gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{Address: "redis:6379", Replicas: 3, FailMode: gatewayv1.FailClosed,
			Username: "sluice", PasswordFile: "/etc/sluice-redis/password", TLS: &gatewayv1.RedisTLS{CAFile: "/etc/sluice-redis-ca/ca.crt", ServerName: "redis.example"}}},
		Jobs: gatewayv1.Jobs{MaxAttempts: 3, ReclaimAfter: metav1.Duration{Duration: time.Minute}, ResultTTL: metav1.Duration{Duration: 24 * time.Hour}, Workers: 4, MaxQueuedPerTenant: 10000,
			MaxBodyBytes: 1 << 20, MaxResultBytes: 8 << 20, MaxBytesPerTenant: 256 << 20}, // the base's workers
		Kept: gatewayv1.Kept{OwnersFor: metav1.Duration{Duration: 720 * time.Hour}, FollowFor: metav1.Duration{Duration: 24 * time.Hour}, ReclaimAfter: metav1.Duration{Duration: 30 * time.Second}},
		Batches: gatewayv1.Batches{MaxFileBytes: 100 << 20, MaxFilesPerTenant: 500, MaxBytesPerTenant: 1 << 30, MaxLinesPerBatch: 10000,
			KeepFor: metav1.Duration{Duration: 720 * time.Hour}, ValleyPercent: 25},
		Global: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 10000, Per: gatewayv1.PeriodMinute, Burst: 10000, OnLimit: gatewayv1.BehaviorQueue}},
		Providers: []gatewayv1.Provider{{
			Name: "llama", API: "openai", Endpoints: []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"},
			// A self-hosted provider's models are capped in max_tokens, which every engine reads.
			Models:         []gatewayv1.Model{{Name: "llama-3.1-8b", DefaultMaxTokens: 256, MaxTokensParam: "max_tokens", ContextWindow: 1 << 20}},
			AdmissionCount: "Characters", Batches: "Queue",
			MaxInFlight:     32, // 2 ready Pods × 1 GPU × 16
			HeadroomPercent: 100,
			Retry:           gatewayv1.Retry{MaxAttempts: 3, BaseDelay: metav1.Duration{Duration: 500 * time.Millisecond}, MaxDelay: metav1.Duration{Duration: 30 * time.Second}},
			Timeout:         metav1.Duration{Duration: time.Minute},
			StallTimeout:    metav1.Duration{Duration: 5 * time.Minute},
			CallTimeout:     metav1.Duration{Duration: 30 * time.Minute},
			Breaker:         gatewayv1.Breaker{Failures: 5, OpenFor: metav1.Duration{Duration: 30 * time.Second}},
			TimeZone:        "UTC", OutputTokenWeight: 1,
		}, {
			Name: "openai", API: "openai", BaseURL: "https://openai.example/v1", APIKeyFile: "openai.key",
			Models: []gatewayv1.Model{{Name: "gpt-4o", Encoding: "o200k_base", DefaultMaxTokens: 512, MaxTokensParam: "max_completion_tokens", ContextWindow: 1 << 20},
				{Name: "gpt-4o-mini", DefaultMaxTokens: 256, MaxTokensParam: "max_completion_tokens", ContextWindow: 1 << 20,
					// A model's own prices, each class's set as its provider's are.
					Prices: &gatewayv1.Prices{InputPerMillion: "0.15", CachedInputPerMillion: "0.075", CacheWritePerMillion: "0.15",
						AudioInputPerMillion: "0.15", OutputPerMillion: "0.60", AudioOutputPerMillion: "0.60"}}},
			RequestsPerMinute: 1500, TokensPerMinute: 300000, AdmissionCount: "Characters", Batches: "Queue", MaxInFlight: 200, HeadroomPercent: 95,
			Limits: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionInputTokens, Amount: 200000, Per: gatewayv1.PeriodMinute},
				{Dimension: gatewayv1.DimensionOutputTokens, Amount: 40000, Per: gatewayv1.PeriodMinute},
				{Dimension: gatewayv1.DimensionRequests, Amount: 100000, Per: gatewayv1.PeriodDay},
				{Dimension: gatewayv1.DimensionOutputTokens, Amount: 10000000, Per: gatewayv1.PeriodDay}},
			TimeZone: "America/Los_Angeles", CachedInputCounts: ptr.To(false), OutputTokenWeight: 5,
			// Each class's price left unset is the input or output price; a tier's, the tier's own.
			Prices: gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", CacheWritePerMillion: "2.50", AudioInputPerMillion: "40",
				OutputPerMillion: "10", AudioOutputPerMillion: "80", Tiers: []gatewayv1.TierPrices{
					{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "2.125", CacheWritePerMillion: "4.25", AudioInputPerMillion: "4.25",
						OutputPerMillion: "17", AudioOutputPerMillion: "17"},
					{Name: "flex", InputPerMillion: "1.25", CachedInputPerMillion: "1.25", CacheWritePerMillion: "1.25", AudioInputPerMillion: "1.25",
						OutputPerMillion: "5", AudioOutputPerMillion: "5"},
				}},
			SpendPerMinute: "0.50", SpendPerMonth: "5000",
			Retry:        gatewayv1.Retry{MaxAttempts: 4, BaseDelay: metav1.Duration{Duration: time.Second}, MaxDelay: metav1.Duration{Duration: 20 * time.Second}},
			Timeout:      metav1.Duration{Duration: 2 * time.Minute},
			StallTimeout: metav1.Duration{Duration: 90 * time.Second},
			CallTimeout:  metav1.Duration{Duration: 30 * time.Minute},
			Azure:        &gatewayv1.Azure{APIVersion: "2024-10-21", Deployments: map[string]string{"gpt-4o": "prod-4o"}},
			Breaker:      gatewayv1.Breaker{Failures: 3, OpenFor: metav1.Duration{Duration: 10 * time.Second}},
		}},
		Plans: []gatewayv1.Tenant{{
			Name:      "pro",
			Providers: []string{"openai", "llama"},
			Priority:  gatewayv1.PriorityBatch, Weight: 3,
			PerUser: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 1000, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionInFlight, Amount: 2, OnLimit: gatewayv1.BehaviorQueue}}, // calls at once: no period, no burst
			PerTenant: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionDollars, Dollars: "5.00", Per: gatewayv1.PeriodMinute, OnLimit: gatewayv1.BehaviorQueue},
				{Dimension: gatewayv1.DimensionInFlight, Amount: 5, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionOutputTokens, Amount: 50000, Per: gatewayv1.PeriodHour, Burst: 50000, OnLimit: gatewayv1.BehaviorQueue},
				{Dimension: gatewayv1.DimensionInputTokens, Amount: 1000000, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject}},
			Endpoints: []gatewayv1.EndpointLimits{{Endpoint: gatewayv1.EndpointChat, Limits: []gatewayv1.Limit{
				{Dimension: gatewayv1.DimensionTokens, Amount: 20000, Per: gatewayv1.PeriodMinute, Burst: 40000, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionInFlight, Amount: 3, OnLimit: gatewayv1.BehaviorQueue},
			}}},
			Budget:   &gatewayv1.Budget{Amount: "5000", Period: gatewayv1.PeriodMonth},
			TimeZone: "Europe/Berlin", MaxWait: metav1.Duration{Duration: 10 * time.Minute},
			Degrade:  &gatewayv1.Degrade{Model: "gpt-4o", Fallback: "gpt-4o-mini", BelowPercent: 20},
			JobScope: gatewayv1.JobScopeUser, ProviderState: gatewayv1.ProviderStateKeep,
		}},
		Tenants: []gatewayv1.Tenant{{
			Name: "acme",
			UID:  "0b6e3c1e-5d0f-4e6a-9a57-2f3c8d1e7b42/acme",
			Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789abcdef"), User: "alice"}},
			Plan: "pro",
		}},
	}
	if diff := cmp.Diff(want, out.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	wantLimits := &v1alpha1.ProviderLimits{RequestsPerMinute: 1425, TokensPerMinute: 285000, MaxInFlight: 190,
		InputTokensPerMinute: 190000, OutputTokensPerMinute: 38000, RequestsPerDay: 95000, OutputTokensPerDay: 9500000}
	if diff := cmp.Diff(wantLimits, out.ProviderQuotas["openai"].EffectiveLimits); diff != "" {
		t.Errorf("effective limits (-want +got):\n%s", diff)
	}
	if base.Store.Redis.FailMode != "" || base.Global[0].Burst != 0 {
		t.Errorf("Compile defaulted the caller's Base: %+v", base)
	}

	// What the gateways read back is what was compiled.
	data, err := yaml.Marshal(out.Config)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := gatewayv1.Parse(data)
	if err != nil {
		t.Fatalf("Parse(compiled config): %v", err)
	}
	// The gateways read the tenant with its plan's terms.
	acme := want.Plans[0]
	acme.Name, acme.UID, acme.Keys = want.Tenants[0].Name, want.Tenants[0].UID, want.Tenants[0].Keys
	want.Tenants[0] = acme
	if diff := cmp.Diff(want, parsed); diff != "" {
		t.Errorf("parsed config (-want +got):\n%s", diff)
	}
}

// TestCompileIsStable checks that the order of the inputs changes nothing,
// so the configuration Secret is not rewritten for nothing.
func TestCompileIsStable(t *testing.T) {
	in := Inputs{
		ProviderQuotas: []v1alpha1.ProviderQuota{quota("b", 0, "m1"), quota("a", 0, "m2")},
		TenantPlans:    []v1alpha1.TenantPlan{plan("y", 0, []string{"t2", "t1"}, []string{"a", "b"}), plan("x", 0, []string{"t3"}, []string{"a"})},
		Secrets: []corev1.Secret{
			providerSecret("a", "ka"), providerSecret("b", "kb"),
			keySecret("s3", "t1", "", "k3"), keySecret("s1", "t1", "", "k1"), keySecret("s2", "t2", "", "k2"), keySecret("s4", "t3", "", "k4"),
		},
	}
	first, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	reverse(in.ProviderQuotas)
	reverse(in.TenantPlans)
	reverse(in.Secrets)
	second, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("compiled differently from reversed inputs (-first +second):\n%s", diff)
	}
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func providerNames(cfg *gatewayv1.Config) []string {
	var out []string
	for _, p := range cfg.Providers {
		out = append(out, p.Name)
	}
	return out
}

// mapValues returns m with f applied to each value, or nil for an empty m,
// so that a case wanting nothing can leave its map out.
func mapValues[V, W any](m map[string]V, f func(V) W) map[string]W {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]W, len(m))
	for k, v := range m {
		out[k] = f(v)
	}
	return out
}

func stringValues(m map[string][]byte) map[string]string {
	return mapValues(m, func(v []byte) string { return string(v) })
}

func tenantKeys(cfg *gatewayv1.Config) map[string][]gatewayv1.Key {
	m := map[string][]gatewayv1.Key{}
	for _, t := range cfg.Tenants {
		m[t.Name] = t.Keys
	}
	return mapValues(m, func(k []gatewayv1.Key) []gatewayv1.Key { return k })
}

func quotaReasons(out *Output) map[string]string {
	return mapValues(out.ProviderQuotas, func(r ProviderResult) string { return r.Reason })
}

func planReasons(out *Output) map[string]string {
	return mapValues(out.TenantPlans, func(r PlanResult) string { return r.Reason })
}

func tenantCounts(out *Output) map[string]int32 {
	return mapValues(out.TenantPlans, PlanResult.TenantCount)
}

func messages(out *Output) string {
	var all []string
	for _, r := range out.ProviderQuotas {
		all = append(all, r.Message)
	}
	for _, r := range out.TenantPlans {
		all = append(all, r.Message)
	}
	return strings.Join(all, "\n")
}

// assertNoKeys fails if a key from secrets appears in the configuration or a
// message. Provider keys belong in the key files only.
func assertNoKeys(t *testing.T, out *Output, secrets []corev1.Secret) {
	t.Helper()
	data, err := yaml.Marshal(out.Config)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data) + messages(out)
	for _, s := range secrets {
		for item, v := range s.Data {
			if key := strings.TrimSpace(string(v)); len(key) > 2 && strings.Contains(text, key) {
				t.Errorf("item %q of Secret %q appears in the configuration or a message", item, s.Name)
			}
		}
	}
}

// defaultServer is the server section of a base configuration that sets none, as the gateway
// configuration defaults it.
func defaultServer() gatewayv1.Server {
	var c gatewayv1.Config
	c.Default()
	return c.Server
}
