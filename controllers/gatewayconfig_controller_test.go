package controllers

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

const configSecretName = "sluice-gateway-config"

// The keys of TestReconcile's Secrets: none may appear outside the
// configuration Secret's key files.
const (
	openaiKey  = "sk-openai-0123456789"
	openaiKey2 = "sk-openai-rotated-9876543210"
	aliceKey   = "sk-acme-alice-0123456789abcdef0123456789abcdef"
	bobKey     = "sk-globex-bob-0123456789abcdef0123456789abcdef"
	claudeKey  = "sk-anthropic-0123456789"
)

// create creates objs in namespace ns, as the server would see them from
// kubectl: with no creation time of their own.
func create(t *testing.T, c client.Client, ns string, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		o.SetNamespace(ns)
		o.SetCreationTimestamp(metav1.Time{})
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestReconcile runs the reconciler on a real API server: the configuration
// Secret, the statuses, a broken object beside working ones, a key that
// changes and a broken object that is mended.
func TestReconcile(t *testing.T) {
	c, ns := newNamespace(t)
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(epoch)
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: c, Recorder: events, Clock: clk, SecretName: configSecretName}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}

	openai := quota("openai", 0, "gpt-4o", "gpt-4o-mini")
	openai.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: 1500, TokensPerMinute: 300000, MaxInFlight: 200}
	openai.Spec.HeadroomPercent = 95
	anthropic := quota("anthropic", 0, "claude")
	pro := plan("pro", 0, []string{"acme", "globex"}, []string{"openai"})
	onClaude := plan("on-claude", 0, []string{"initech"}, []string{"anthropic"})
	secrets := []corev1.Secret{
		providerSecret("openai", openaiKey),
		keySecret("acme-alice", "acme", "alice", aliceKey),
		keySecret("globex-bob", "globex", "bob", bobKey),
		keySecret("initech-carol", "initech", "carol", "sk-initech-carol-0123456789abcdef0123456789"),
		{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}, StringData: map[string]string{"password": "hunter2-0123456789"}},
	}
	create(t, c, ns, &openai, &anthropic, &pro, &onClaude)
	for i := range secrets {
		create(t, c, ns, &secrets[i])
	}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	// The Secret: config.yaml parses, holds hashes only, names the key
	// file; the key file; the hash; the owners.
	secret := getSecret(t, c, ns)
	cfg := mustLoadWritten(t, c, ns)
	if diff := cmp.Diff([]string{"openai"}, providerNames(cfg)); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	wantKeys := map[string][]gatewayv1.Key{
		"acme":   {{SHA256: gatewayv1.HashKey(aliceKey), User: "alice"}},
		"globex": {{SHA256: gatewayv1.HashKey(bobKey), User: "bob"}},
	}
	if diff := cmp.Diff(wantKeys, tenantKeys(cfg)); diff != "" {
		t.Errorf("tenants' keys (-want +got):\n%s", diff)
	}
	if key, err := os.ReadFile(cfg.Provider("openai").APIKeyFile); err != nil || string(key) != openaiKey {
		t.Errorf("openai's apiKeyFile %s: %d bytes, %v; want the provider's key, beside config.yaml", cfg.Provider("openai").APIKeyFile, len(key), err)
	}
	if got := string(secret.Data["openai.key"]); got != openaiKey {
		t.Errorf("item openai.key = %d bytes; want the provider's key", len(got))
	}
	if got, want := secret.Annotations[ConfigHashAnnotation], dataHash(secret.Data); got != want {
		t.Errorf("hash annotation = %q; want %q", got, want)
	}
	wantOwners := []string{"ProviderQuota/anthropic", "ProviderQuota/openai", "TenantPlan/on-claude", "TenantPlan/pro"}
	if diff := cmp.Diff(wantOwners, owners(t, c, secret)); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}

	// The statuses: the working objects Ready, the broken ones not, each
	// with its reason and the generation it describes.
	assertReady(t, c, ns, &v1alpha1.ProviderQuota{}, "openai", metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	assertReady(t, c, ns, &v1alpha1.ProviderQuota{}, "anthropic", metav1.ConditionFalse, v1alpha1.ReasonKeySecretMissing)
	assertReady(t, c, ns, &v1alpha1.TenantPlan{}, "pro", metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	assertReady(t, c, ns, &v1alpha1.TenantPlan{}, "on-claude", metav1.ConditionFalse, v1alpha1.ReasonUnknownProvider)
	var gotQuota v1alpha1.ProviderQuota
	get(t, c, ns, "openai", &gotQuota)
	wantLimits := &v1alpha1.ProviderLimits{RequestsPerMinute: 1425, TokensPerMinute: 285000, MaxInFlight: 190}
	if diff := cmp.Diff(wantLimits, gotQuota.Status.EffectiveLimits); diff != "" {
		t.Errorf("openai's effectiveLimits (-want +got):\n%s", diff)
	}
	var gotPlan v1alpha1.TenantPlan
	get(t, c, ns, "pro", &gotPlan)
	if got := gotPlan.Status.TenantCount; got == nil || *got != 2 {
		t.Errorf("pro's tenantCount = %v; want 2", got)
	}

	// Nothing changed, so nothing is written.
	before := resourceVersions(t, c, ns)
	clk.SetTime(epoch.Add(time.Minute))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile again: %v", err)
	}
	if diff := cmp.Diff(before, resourceVersions(t, c, ns)); diff != "" {
		t.Errorf("a reconcile with nothing new wrote (-before +after):\n%s", diff)
	}

	// The provider's key changes; the copy follows.
	updateSecretData(t, c, ns, "openai", openaiKey2)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile after the key changed: %v", err)
	}
	rotated := getSecret(t, c, ns)
	if string(rotated.Data["openai.key"]) != openaiKey2 {
		t.Errorf("item openai.key did not follow the key Secret")
	}
	if rotated.Annotations[ConfigHashAnnotation] == secret.Annotations[ConfigHashAnnotation] {
		t.Errorf("hash annotation did not change with the key")
	}

	// The missing key arrives; the broken objects mend, and the working
	// ones keep the time they became Ready.
	clk.SetTime(epoch.Add(2 * time.Minute))
	create(t, c, ns, ptrTo(providerSecret("anthropic", claudeKey)))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile after the key arrived: %v", err)
	}
	assertReady(t, c, ns, &v1alpha1.ProviderQuota{}, "anthropic", metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	assertReady(t, c, ns, &v1alpha1.TenantPlan{}, "on-claude", metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	get(t, c, ns, "openai", &gotQuota)
	if got := meta.FindStatusCondition(gotQuota.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime; !got.Equal(&metav1.Time{Time: epoch}) {
		t.Errorf("openai's Ready lastTransitionTime = %v; want %v, when it became Ready", got, epoch)
	}
	if cfg, err := loadWritten(t, c, ns); err != nil || len(cfg.Tenants) != 3 {
		t.Errorf("after the key arrived: config parses with err %v; want 3 tenants", err)
	}

	// Events tell a person what happened, and hold no key.
	all := events.all()
	for _, want := range []string{
		"*v1alpha1.ProviderQuota anthropic: Warning KeySecretMissing Compile: Secret \"anthropic\" not found.",
		"*v1alpha1.ProviderQuota anthropic: Normal Compiled Compile",
		"*v1.Secret sluice-gateway-config: Normal ConfigurationWritten Compile: Created with 1 provider and 2 tenants.",
		"*v1.Secret sluice-gateway-config: Normal ConfigurationWritten Compile: Updated with 2 providers and 3 tenants.",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("events:\n%s\nwant one holding %q", all, want)
		}
	}
	assertNoSecretsOutside(t, c, ns, all)
}

func getSecret(t *testing.T, c client.Client, ns string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	get(t, c, ns, configSecretName, &s)
	return &s
}

func get(t *testing.T, c client.Client, ns, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
}

func updateSecretData(t *testing.T, c client.Client, ns, name, key string) {
	t.Helper()
	var s corev1.Secret
	get(t, c, ns, name, &s)
	s.Data[v1alpha1.KeySecretItem] = []byte(key)
	if err := c.Update(context.Background(), &s); err != nil {
		t.Fatalf("update Secret %s: %v", name, err)
	}
}

// owners returns the object's owners as Kind/name, and checks that each
// refers to the object of that name by its UID.
func owners(t *testing.T, c client.Client, s client.Object) []string {
	t.Helper()
	var out []string
	for _, ref := range s.GetOwnerReferences() {
		var obj client.Object = &v1alpha1.ProviderQuota{}
		if ref.Kind == "TenantPlan" {
			obj = &v1alpha1.TenantPlan{}
		}
		get(t, c, s.GetNamespace(), ref.Name, obj)
		if obj.GetUID() != ref.UID || ref.APIVersion != v1alpha1.GroupVersion.String() {
			t.Errorf("owner reference %+v does not match %s/%s (uid %s)", ref, ref.Kind, ref.Name, obj.GetUID())
		}
		out = append(out, ref.Kind+"/"+ref.Name)
	}
	return out
}

// assertReady checks an object's Ready condition and that its status
// describes its current generation.
func assertReady(t *testing.T, c client.Client, ns string, obj client.Object, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	get(t, c, ns, name, obj)
	var conds []metav1.Condition
	var observed int64
	switch o := obj.(type) {
	case *v1alpha1.ProviderQuota:
		conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
	case *v1alpha1.TenantPlan:
		conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
	}
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	switch {
	case ready == nil:
		t.Errorf("%T %s has no Ready condition", obj, name)
	case ready.Status != status || ready.Reason != reason:
		t.Errorf("%T %s is Ready=%s %s (%s); want Ready=%s %s", obj, name, ready.Status, ready.Reason, ready.Message, status, reason)
	case ready.ObservedGeneration != obj.GetGeneration() || observed != obj.GetGeneration():
		t.Errorf("%T %s: observedGeneration %d, Ready's %d; want %d", obj, name, observed, ready.ObservedGeneration, obj.GetGeneration())
	}
}

// resourceVersions returns the resourceVersion of every Sluice object and
// of the configuration's Secrets.
func resourceVersions(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	out := secretVersions(getConfigSecrets(t, c, ns))
	var pqs v1alpha1.ProviderQuotaList
	var tps v1alpha1.TenantPlanList
	if err := c.List(context.Background(), &pqs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &tps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, pq := range pqs.Items {
		out["ProviderQuota/"+pq.Name] = pq.ResourceVersion
	}
	for _, tp := range tps.Items {
		out["TenantPlan/"+tp.Name] = tp.ResourceVersion
	}
	return out
}

// assertNoSecretsOutside checks that no Secret's value of the namespace
// appears in a status, in the events, or in config.yaml; and that no
// ConfigMap exists to hold one.
func assertNoSecretsOutside(t *testing.T, c client.Client, ns, events string) {
	t.Helper()
	ctx := context.Background()
	var secrets corev1.SecretList
	var pqs v1alpha1.ProviderQuotaList
	var tps v1alpha1.TenantPlanList
	var cms corev1.ConfigMapList
	for _, list := range []client.ObjectList{&secrets, &pqs, &tps, &cms} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	var public []string
	for _, pq := range pqs.Items {
		public = append(public, mustJSON(t, pq.Status))
	}
	for _, tp := range tps.Items {
		public = append(public, mustJSON(t, tp.Status))
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			public = append(public, mustJSON(t, cm))
		}
	}
	public = append(public, events, string(getSecret(t, c, ns).Data[ConfigFile]))
	text := strings.Join(public, "\n")
	for _, s := range secrets.Items {
		if s.Name == configSecretName {
			continue
		}
		for item, v := range s.Data {
			if strings.Contains(text, string(v)) {
				t.Errorf("item %q of Secret %q appears in a status, an event, a ConfigMap or config.yaml", item, s.Name)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
