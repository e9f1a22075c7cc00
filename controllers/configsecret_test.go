package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

func TestDataHash(t *testing.T) {
	a := dataHash(map[string][]byte{"config.yaml": []byte("x"), "openai.key": []byte("k")})
	tests := []struct {
		name string
		data map[string][]byte
		same bool
	}{
		{"same items", map[string][]byte{"openai.key": []byte("k"), "config.yaml": []byte("x")}, true},
		{"another key", map[string][]byte{"config.yaml": []byte("x"), "openai.key": []byte("k2")}, false},
		{"bytes moved between name and value", map[string][]byte{"config.yaml": []byte("x"), "openai.ke": []byte("yk")}, false},
		{"an item fewer", map[string][]byte{"config.yaml": []byte("x")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dataHash(tc.data) == a; got != tc.same {
				t.Errorf("hash equal = %t; want %t", got, tc.same)
			}
		})
	}
}

func TestConfigSecret(t *testing.T) {
	pq := quota("openai", 0, "gpt-4o")
	pq.UID = "uid-pq"
	tp := plan("pro", 0, []string{"acme"}, []string{"openai"})
	tp.UID = "uid-tp"
	in := &Inputs{
		ProviderQuotas: []v1alpha1.ProviderQuota{pq},
		TenantPlans:    []v1alpha1.TenantPlan{tp},
		Secrets:        []corev1.Secret{providerSecret("openai", "sk-openai"), keySecret("acme-alice", "acme", "alice", "sk-alice")},
	}
	out, err := Compile(*in)
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: testNamespace, Name: configSecretName}
	all, err := configSecrets(key, in, out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff(ConfigSecretNames(configSecretName), names); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
	// What the gateways load from the Secrets projected into one directory
	// is what was compiled.
	loaded, err := loadProjected(t, all)
	if err != nil {
		t.Fatalf("the written Secrets do not load: %v", err)
	}
	want := parseCompiled(t, out.Config)
	if got := filepath.Base(loaded.Providers[0].APIKeyFile); got != "openai.key" {
		t.Errorf("openai's apiKeyFile = %q; want openai.key beside config.yaml", got)
	}
	want.Providers[0].APIKeyFile = loaded.Providers[0].APIKeyFile // resolved by Load
	if diff := cmp.Diff(want, loaded, cmpopts.IgnoreFields(gatewayv1.Config{}, "TenantFiles", "RecordFiles")); diff != "" {
		t.Errorf("loaded configuration (-compiled +loaded):\n%s", diff)
	}
	for n, path := range loaded.RecordFiles {
		if filepath.Dir(path) != filepath.Dir(loaded.Providers[0].APIKeyFile) || filepath.Base(path) != RecordFile(n) {
			t.Errorf("recordFiles[%d] = %s; want %s beside config.yaml", n, path, RecordFile(n))
		}
	}
	if len(loaded.RecordFiles) != RecordShards {
		t.Errorf("config.yaml names %d record files; want %d", len(loaded.RecordFiles), RecordShards)
	}
	desired := all[len(all)-1]
	if got := string(desired.Data["openai.key"]); got != "sk-openai" {
		t.Errorf("openai.key = %q; want the provider's key", got)
	}
	wantOwners := []metav1.OwnerReference{
		{APIVersion: "sluice.dev/v1alpha1", Kind: "ProviderQuota", Name: "openai", UID: "uid-pq"},
		{APIVersion: "sluice.dev/v1alpha1", Kind: "TenantPlan", Name: "pro", UID: "uid-tp"},
	}
	for _, s := range all {
		if diff := cmp.Diff(wantOwners, s.OwnerReferences); diff != "" {
			t.Errorf("%s: owners (-want +got):\n%s", s.Name, diff)
		}
	}

	// Someone else's label and annotation survive an update; a changed
	// item is not up to date.
	existing := desired.DeepCopy()
	existing.Labels["team"], existing.Annotations["note"] = "infra", "hands off"
	if !secretUpToDate(existing, desired) {
		t.Errorf("a Secret differing in someone else's label is not up to date")
	}
	existing.Data["openai.key"] = []byte("edited by hand")
	if secretUpToDate(existing, desired) {
		t.Errorf("a Secret with an item edited by hand is up to date")
	}
	updateSecret(existing, desired)
	if !secretUpToDate(existing, desired) || existing.Labels["team"] != "infra" || existing.Annotations["note"] != "hands off" {
		t.Errorf("after updateSecret: up to date %t, labels %v, annotations %v", secretUpToDate(existing, desired), existing.Labels, existing.Annotations)
	}
}

// parseCompiled returns cfg as the gateways read it when it is written in
// one file: with each tenant's plan's terms in place.
func parseCompiled(t *testing.T, cfg *gatewayv1.Config) *gatewayv1.Config {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := gatewayv1.Parse(data)
	if err != nil {
		t.Fatalf("parse the compiled configuration: %v", err)
	}
	return parsed
}

// TestTenantShards checks that tenants spread over every tenant Secret.
func TestTenantShards(t *testing.T) {
	counts := make([]int, TenantShards)
	for i := range 1000 {
		counts[tenantShard(fmt.Sprintf("tenant-%05d", i))]++
	}
	for n, c := range counts {
		if c < 1000/TenantShards/2 {
			t.Errorf("tenant Secret %d holds %d of 1000 tenants; want about %d", n, c, 1000/TenantShards)
		}
	}
}

// TestRoleNamesTenantSecrets checks that the manager's Role may update
// every Secret and record ConfigMap it writes under the default name.
func TestRoleNamesTenantSecrets(t *testing.T) {
	role, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ConfigSecretNames("sluice-gateway-config") {
		if !strings.Contains(string(role), "  - "+name+"\n") {
			t.Errorf("config/rbac/role.yaml names no Secret %s: list it in the rbac marker of gatewayconfig_controller.go", name)
		}
	}
	for _, name := range RecordConfigMapNames("sluice-gateway-config") {
		if !strings.Contains(string(role), "  - "+name+"\n") {
			t.Errorf("config/rbac/role.yaml names no ConfigMap %s: list it in the rbac marker of record_configmaps.go", name)
		}
	}
}
