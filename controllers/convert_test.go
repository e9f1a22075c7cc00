package controllers

import (
	"cmp"
	"iter"
	"maps"
	"reflect"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// TestSpecsMirrorGateway checks that every field of a ProviderQuota's and a
// TenantPlan's spec has a counterpart of the same kind in the gateway's
// Provider and Tenant, and the other way round, so that a limit added on one
// side only fails here. The fields without a counterpart are listed, each
// with where its value comes from or goes to.
func TestSpecsMirrorGateway(t *testing.T) {
	const (
		selfHosted = "compiled into baseURL, maxInFlight and paused"
		inList     = "compiled into an entry of limits"
		fromFields = "an entry of limits, compiled from a field of spec.limits"
	)
	tests := []struct {
		name          string
		spec, gateway reflect.Type
		// renamed maps a spec field to its gateway counterpart; the others
		// keep their JSON path.
		renamed map[string]string
		// specOnly and gatewayOnly hold the fields without a counterpart.
		specOnly, gatewayOnly map[string]string
	}{{
		name:    "ProviderQuota",
		spec:    reflect.TypeFor[v1alpha1.ProviderQuotaSpec](),
		gateway: reflect.TypeFor[gatewayv1.Provider](),
		renamed: map[string]string{
			"limits.requestsPerMinute": "requestsPerMinute",
			"limits.tokensPerMinute":   "tokensPerMinute",
			"limits.maxInFlight":       "maxInFlight",
			"spend.perMinute":          "spendPerMinute",
			"spend.perMonth":           "spendPerMonth",
		},
		specOnly: map[string]string{
			"selfHosted.selector":             selfHosted,
			"selfHosted.port":                 selfHosted,
			"selfHosted.engine":               "read by the metrics adapter",
			"selfHosted.gpusPerPod":           selfHosted,
			"selfHosted.maxConcurrencyPerGPU": selfHosted,
			"selfHosted.gpuQuota":             selfHosted,
			"apiKeySecretRef.name":            "the key is copied into the file apiKeyFile names",
			"apiKeySecretRef.key":             "the key is copied into the file apiKeyFile names",
			"limits.inputTokensPerMinute":     inList,
			"limits.outputTokensPerMinute":    inList,
			"limits.requestsPerDay":           inList,
			"limits.tokensPerDay":             inList,
			"limits.inputTokensPerDay":        inList,
			"limits.outputTokensPerDay":       inList,
		},
		gatewayOnly: map[string]string{
			"name":             "metadata.name",
			"apiKeyFile":       "names the file of apiKeySecretRef's key",
			"paused":           "set while a self-hosted provider has no ready Pod",
			"endpoints":        "a self-hosted provider's ready Pods",
			"limits.dimension": fromFields,
			"limits.amount":    fromFields,
			"limits.per":       fromFields,
			"limits.dollars":   "never set: a provider's limits count requests and tokens",
			"limits.burst":     "never set: a provider's minute is paced as it counts it",
			"limits.onLimit":   "never set: a provider's limits queue",
		},
	}, {
		name:    "TenantPlan",
		spec:    reflect.TypeFor[v1alpha1.TenantPlanSpec](),
		gateway: reflect.TypeFor[gatewayv1.Tenant](),
		specOnly: map[string]string{
			"tenants":           "each names a Tenant",
			"keySecretSelector": "selects the key Secrets",
		},
		gatewayOnly: map[string]string{
			"name":        "one of spec.tenants",
			"uid":         "metadata.uid and one of spec.tenants",
			"keys.sha256": "hashed from a key Secret",
			"keys.user":   "a key Secret's user label or name",
			"plan":        "the TenantPlan's name",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, gateway := jsonFields(tc.spec), jsonFields(tc.gateway)
			checkListed(t, "renamed", maps.Keys(tc.renamed), spec)
			checkListed(t, "specOnly", maps.Keys(tc.specOnly), spec)
			checkListed(t, "gatewayOnly", maps.Keys(tc.gatewayOnly), gateway)

			mirrored := map[string]reflect.Kind{}
			for name, kind := range spec {
				if _, ok := tc.specOnly[name]; !ok {
					mirrored[cmp.Or(tc.renamed[name], name)] = kind
				}
			}
			for name := range tc.gatewayOnly {
				delete(gateway, name)
			}
			if diff := gocmp.Diff(gateway, mirrored); diff != "" {
				t.Errorf("gateway fields and their kinds (-gateway +spec):\n%s", diff)
			}
		})
	}
}

// TestProviderPathsNameQuotaFields checks that every path at which a
// ProviderQuota's errors are reported is a field of a ProviderQuota.
func TestProviderPathsNameQuotaFields(t *testing.T) {
	fields := map[string]bool{"metadata.name": true}
	for name := range jsonFields(reflect.TypeFor[v1alpha1.ProviderQuotaSpec]()) {
		for p := "spec." + name; p != ""; p = p[:max(strings.LastIndex(p, "."), 0)] {
			fields[p] = true // the field and the structs that hold it
		}
	}
	hosted, selfHosted := quota("openai", 0, "gpt-4o"), quota("llama", 0, "llama")
	selfHosted.Spec.SelfHosted = &v1alpha1.SelfHosted{Port: 8000}
	for _, pq := range []v1alpha1.ProviderQuota{hosted, selfHosted} {
		pp := providerPaths(&pq)
		paths := reflect.ValueOf(pp)
		for i := range paths.NumField() {
			name := paths.Type().Field(i).Name
			if name == "Limit" {
				continue
			}
			if got := paths.Field(i).Interface().(*field.Path).String(); !fields[got] {
				t.Errorf("%s: ProviderPaths.%s = %s; want a field of ProviderQuota", pq.Name, name, got)
			}
		}
		for i, f := range providerLimitFields {
			if got := pp.Limit(i, gatewayv1.Limit{Dimension: f.dimension, Per: f.per}).String(); got != "spec.limits."+f.name || !fields[got] {
				t.Errorf("%s: ProviderPaths.Limit of %s per %s = %s; want spec.limits.%s, a field of ProviderQuota", pq.Name, f.dimension, f.per, got, f.name)
			}
		}
	}
}

// jsonFields returns the dotted JSON paths of the fields of the struct type
// t, and their kinds. It descends into the structs of t's own package, also
// through pointers and slices; a struct of another package, such as
// metav1.Duration, is one field.
func jsonFields(t reflect.Type) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	addJSONFields(out, t, "")
	return out
}

func addJSONFields(out map[string]reflect.Kind, t reflect.Type, prefix string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			addJSONFields(out, ft, prefix+name+".")
			continue
		}
		out[prefix+name] = ft.Kind()
	}
}

// checkListed fails for each listed name that is not a field, so that the
// lists cannot keep a field that is gone.
func checkListed(t *testing.T, list string, names iter.Seq[string], fields map[string]reflect.Kind) {
	t.Helper()
	for name := range names {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s lists %q, which is not a field", list, name)
		}
	}
}
