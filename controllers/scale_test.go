package controllers

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// The scale the operator must carry in one namespace.
const (
	scaleTenants        = 5000
	scaleKeysPerTenant  = 4
	scaleTenantsPerPlan = 100
)

// scaleObjects returns one provider, its key, and scaleTenants tenants in
// plans of scaleTenantsPerPlan, each tenant with scaleKeysPerTenant keys.
// The plans carry the terms a real plan does: a budget and per-user and
// per-tenant limits.
func scaleObjects() ([]v1alpha1.ProviderQuota, []v1alpha1.TenantPlan, []corev1.Secret) {
	pqs := []v1alpha1.ProviderQuota{quota("openai", 0, "gpt-4o", "gpt-4o-mini")}
	secrets := []corev1.Secret{providerSecret("openai", "sk-openai-0123456789")}
	var tps []v1alpha1.TenantPlan
	for p := range scaleTenants / scaleTenantsPerPlan {
		var tenants []string
		for i := range scaleTenantsPerPlan {
			tenant := fmt.Sprintf("tenant-%05d", p*scaleTenantsPerPlan+i)
			tenants = append(tenants, tenant)
			for k := range scaleKeysPerTenant {
				user := fmt.Sprintf("user-%d", k)
				secrets = append(secrets, keySecret(tenant+"-"+user, tenant, user, fmt.Sprintf("sk-%s-%s-0123456789abcdef0123456789", tenant, user)))
			}
		}
		tp := plan(fmt.Sprintf("plan-%03d", p), 0, tenants, []string{"openai"})
		tp.Spec.Budget = &v1alpha1.Budget{Amount: "100", Period: v1alpha1.BudgetPeriodMonth}
		tp.Spec.TimeZone = "Europe/Berlin"
		tp.Spec.PerUser = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 60, Per: v1alpha1.PeriodMinute}}
		tp.Spec.PerTenant = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionTokens, Amount: 1000000, Per: v1alpha1.PeriodDay}}
		tps = append(tps, tp)
	}
	return pqs, tps, secrets
}

// TestConfigSizeAtScale measures what the operator writes for 5,000
// tenants with 20,000 keys, and how long the gateway takes to load it: every
// Secret must fit, and the gateway must load all the tenants and keys.
func TestConfigSizeAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 5,000 tenants")
	}
	all := scaleSecrets(t)
	checkSizes(t, all)
	start := time.Now()
	cfg, err := loadProjected(t, all)
	if err != nil {
		t.Fatalf("the gateway cannot load what the operator compiled: %v", err)
	}
	t.Logf("gatewayv1.Load took %s", time.Since(start)) // a measurement, never asserted
	if got := countKeys(cfg); len(cfg.Tenants) != scaleTenants || got != scaleTenants*scaleKeysPerTenant {
		t.Errorf("loaded %d tenants with %d keys; want %d with %d", len(cfg.Tenants), got, scaleTenants, scaleTenants*scaleKeysPerTenant)
	}
}

// checkSizes fails the test if a Secret is past what the API server
// accepts, and logs their sizes.
func checkSizes(t *testing.T, secrets []*corev1.Secret) {
	t.Helper()
	total, largest := 0, secrets[0]
	for _, s := range secrets {
		size := secretDataSize(s)
		total += size
		if size > secretDataSize(largest) {
			largest = s
		}
		if size > corev1.MaxSecretSize {
			t.Errorf("Secret %s holds %d bytes; a Secret holds at most %d", s.Name, size, corev1.MaxSecretSize)
		}
	}
	t.Logf("%d Secrets, %d bytes of data in all; the largest, %s, %d bytes (limit %d)",
		len(secrets), total, largest.Name, secretDataSize(largest), corev1.MaxSecretSize) // a measurement
}

func countKeys(cfg *gatewayv1.Config) int {
	n := 0
	for _, t := range cfg.Tenants {
		n += len(t.Keys)
	}
	return n
}

// BenchmarkLoadAtScale measures how long a gateway takes to load the
// configuration of 5,000 tenants with 20,000 keys from its Secrets.
func BenchmarkLoadAtScale(b *testing.B) {
	dir := b.TempDir()
	project(b, dir, scaleSecrets(b))
	for b.Loop() {
		if _, err := gatewayv1.Load(filepath.Join(dir, ConfigFile)); err != nil {
			b.Fatal(err)
		}
	}
}

// scaleSecrets returns the Secrets the operator writes for scaleObjects.
func scaleSecrets(tb testing.TB) []*corev1.Secret {
	tb.Helper()
	pqs, tps, secrets := scaleObjects()
	in := &Inputs{ProviderQuotas: pqs, TenantPlans: tps, Secrets: secrets}
	out, err := Compile(*in)
	if err != nil {
		tb.Fatal(err)
	}
	all, err := configSecrets(types.NamespacedName{Namespace: testNamespace, Name: configSecretName}, in, out)
	if err != nil {
		tb.Fatal(err)
	}
	return all
}

// TestReconcileAtScale reconciles 5,000 tenants with 20,000 keys on the API
// server. Every Secret it writes must fit; a rotated key must reach what
// the gateways load, in place of the old one, by rewriting two Secrets: the
// configuration Secret and the tenant's own; and a deleted key Secret must
// stop working.
func TestReconcileAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 20,000 Secrets on the API server")
	}
	c, ns := newNamespace(t)
	createScaleObjects(t, c, ns)
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: c, Recorder: events, SecretName: configSecretName}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}
	reconcile()
	checkSizes(t, getConfigSecrets(t, c, ns))
	cfg := mustLoadWritten(t, c, ns)
	if got := countKeys(cfg); len(cfg.Tenants) != scaleTenants || got != scaleTenants*scaleKeysPerTenant {
		t.Fatalf("the gateways load %d tenants with %d keys; want %d with %d", len(cfg.Tenants), got, scaleTenants, scaleTenants*scaleKeysPerTenant)
	}
	assertReady(t, c, ns, &v1alpha1.TenantPlan{}, "plan-000", metav1.ConditionTrue, v1alpha1.ReasonCompiled)

	const tenant, rotated = "tenant-01234", "sk-tenant-01234-user-1-rotated-0123456789"
	old := fmt.Sprintf("sk-%s-user-1-0123456789abcdef0123456789", tenant)
	checkKey(t, cfg, old, tenant)
	before := secretVersions(getConfigSecrets(t, c, ns))
	updateSecretData(t, c, ns, tenant+"-user-1", rotated)
	reconcile()
	cfg = mustLoadWritten(t, c, ns)
	checkKey(t, cfg, rotated, tenant)
	checkKey(t, cfg, old, "")
	changed := changedSecrets(before, secretVersions(getConfigSecrets(t, c, ns)))
	if want := []string{configSecretName, TenantSecretName(configSecretName, tenantShard(tenant))}; !cmp.Equal(changed, want) {
		t.Errorf("a rotated key rewrote Secrets %q; want %q", changed, want)
	}

	deleted := "sk-tenant-04321-user-2-0123456789abcdef0123456789"
	checkKey(t, cfg, deleted, "tenant-04321")
	if err := c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-04321-user-2"}}); err != nil {
		t.Fatal(err)
	}
	reconcile()
	cfg = mustLoadWritten(t, c, ns)
	checkKey(t, cfg, deleted, "")
	checkKey(t, cfg, "sk-tenant-04321-user-3-0123456789abcdef0123456789", "tenant-04321")
}

// TestReconcileTooLarge reconciles a configuration Secret that cannot fit:
// a provider key of nearly 1 MiB beside config.yaml. Reconcile must write
// none of the configuration's Secrets, return no error (a retry cannot
// help), and mark the objects ConfigTooLarge with a Warning event.
func TestReconcileTooLarge(t *testing.T) {
	c, ns := newNamespace(t)
	ctx := context.Background()
	pq := quota("openai", 0, "gpt-4o")
	tp := plan("pro", 0, []string{"acme"}, []string{"openai"})
	huge := providerSecret("openai", strings.Repeat("k", corev1.MaxSecretSize-1000))
	alice := keySecret("acme-alice", "acme", "alice", "sk-acme-alice-0123456789abcdef0123456789")
	create(t, c, ns, &pq, &tp, &huge, &alice)
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: c, Recorder: events, SecretName: configSecretName}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for _, name := range ConfigSecretNames(configSecretName) {
		var s corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); !apierrors.IsNotFound(err) {
			t.Errorf("get Secret %s: %v; want not found", name, err)
		}
	}
	assertReady(t, c, ns, &v1alpha1.TenantPlan{}, "pro", metav1.ConditionFalse, v1alpha1.ReasonConfigTooLarge)
	assertReady(t, c, ns, &v1alpha1.ProviderQuota{}, "openai", metav1.ConditionFalse, v1alpha1.ReasonConfigTooLarge)
	if all := events.all(); !strings.Contains(all, "Warning ConfigTooLarge") {
		t.Errorf("events hold no Warning ConfigTooLarge")
	}
	for _, kind := range []string{"ProviderQuota", "TenantPlan"} {
		if got := testutil.ToFloat64(objectsByReason.WithLabelValues(ns, kind, v1alpha1.ReasonConfigTooLarge)); got != 1 {
			t.Errorf("sluice_manager_objects{kind=%q,reason=\"ConfigTooLarge\"} = %v; want 1, for the SluiceConfigTooLarge alert", kind, got)
		}
	}
	// Once the key fits, the namespace's objects are counted Compiled, and ConfigTooLarge no more.
	huge.Data = map[string][]byte{v1alpha1.KeySecretItem: []byte("sk-openai-0123456789abcdef")}
	if err := c.Update(ctx, &huge); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for _, kind := range []string{"ProviderQuota", "TenantPlan"} {
		if objectsByReason.DeleteLabelValues(ns, kind, v1alpha1.ReasonConfigTooLarge) {
			t.Errorf("a %s is still counted ConfigTooLarge after the configuration fits", kind)
		}
	}
	if got := testutil.ToFloat64(objectsByReason.WithLabelValues(ns, "TenantPlan", v1alpha1.ReasonCompiled)); got != 1 {
		t.Errorf("sluice_manager_objects{kind=\"TenantPlan\",reason=\"Compiled\"} = %v; want 1", got)
	}
}

// createScaleObjects creates scaleObjects in namespace ns.
func createScaleObjects(t *testing.T, c client.Client, ns string) {
	t.Helper()
	pqs, tps, secrets := scaleObjects()
	var objs []client.Object
	for i := range pqs {
		objs = append(objs, &pqs[i])
	}
	for i := range tps {
		objs = append(objs, &tps[i])
	}
	for i := range secrets {
		objs = append(objs, &secrets[i])
	}
	createConcurrently(t, c, ns, objs)
}

// getConfigSecrets returns the configuration's Secrets in namespace ns.
func getConfigSecrets(t *testing.T, c client.Client, ns string) []*corev1.Secret {
	t.Helper()
	var out []*corev1.Secret
	for _, name := range ConfigSecretNames(configSecretName) {
		var s corev1.Secret
		get(t, c, ns, name, &s)
		out = append(out, &s)
	}
	return out
}

func secretVersions(secrets []*corev1.Secret) map[string]string {
	out := map[string]string{}
	for _, s := range secrets {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// changedSecrets names the Secrets whose resource version differs, in
// name order.
func changedSecrets(before, after map[string]string) []string {
	var out []string
	for name, v := range after {
		if before[name] != v {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkKey checks that a gateway with cfg accepts key as tenant's, as the
// gateway's policy does (by the key's SHA-256), or accepts it not at all
// when tenant is empty.
func checkKey(t *testing.T, cfg *gatewayv1.Config, key, tenant string) {
	t.Helper()
	got := ""
	hash := gatewayv1.HashKey(key)
	for _, tn := range cfg.Tenants {
		for _, k := range tn.Keys {
			if k.SHA256 == hash {
				got = tn.Name
			}
		}
	}
	if got != tenant {
		t.Errorf("key %.16s... authenticates as tenant %q; want %q", key, got, tenant)
	}
}

// createConcurrently creates objs in namespace ns, a few at a time.
func createConcurrently(t *testing.T, c client.Client, ns string, objs []client.Object) {
	t.Helper()
	work := make(chan client.Object)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Go(func() {
			for o := range work {
				o.SetNamespace(ns)
				o.SetCreationTimestamp(metav1.Time{})
				if err := c.Create(context.Background(), o); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%T %s: %w", o, o.GetName(), err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("create: %v", firstErr)
	}
}
