package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	key := types.NamespacedName{Namespace: testNamespace, Name: "cfg"}
	desired, err := configSecret(key, in, out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gatewayv1.Parse(desired.Data[ConfigFile])
	if err != nil {
		t.Fatalf("config.yaml does not parse: %v", err)
	}
	if diff := cmp.Diff(out.Config, cfg); diff != "" {
		t.Errorf("config.yaml parses to (-compiled +parsed):\n%s", diff)
	}
	if got := string(desired.Data["openai.key"]); got != "sk-openai" {
		t.Errorf("openai.key = %q; want the provider's key", got)
	}
	wantOwners := []metav1.OwnerReference{
		{APIVersion: "sluice.dev/v1alpha1", Kind: "ProviderQuota", Name: "openai", UID: "uid-pq"},
		{APIVersion: "sluice.dev/v1alpha1", Kind: "TenantPlan", Name: "pro", UID: "uid-tp"},
	}
	if diff := cmp.Diff(wantOwners, desired.OwnerReferences); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
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
