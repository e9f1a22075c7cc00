package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
		tp.Spec.Budget = &v1alpha1.Budget{Amount: "100", Period: v1alpha1.PeriodMonth}
		tp.Spec.TimeZone = "Europe/Berlin"
		tp.Spec.PerUser = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 60, Per: v1alpha1.PeriodMinute}}
		tp.Spec.PerTenant = []v1alpha1.Limit{{Dimension: v1alpha1.DimensionTokens, Amount: 1000000, Per: v1alpha1.PeriodDay}}
		tps = append(tps, tp)
	}
	return pqs, tps, secrets
}

// TestConfigSizeAtScale measures what the operator writes for 5,000
// tenants with 20,000 keys, and how the gateway loads it, and checks that
// a configuration past a Secret's size marks every object ConfigTooLarge.
func TestConfigSizeAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 5,000 tenants")
	}
	pqs, tps, secrets := scaleObjects()
	in := &Inputs{ProviderQuotas: pqs, TenantPlans: tps, Secrets: secrets}
	out, err := Compile(*in)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := configSecret(types.NamespacedName{Namespace: testNamespace, Name: "cfg"}, in, out)
	if err != nil {
		t.Fatal(err)
	}
	size := secretDataSize(desired)
	path := filepath.Join(t.TempDir(), ConfigFile)
	if err := os.WriteFile(path, desired.Data[ConfigFile], 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg, err := gatewayv1.Load(path)
	if err != nil {
		t.Fatalf("the gateway cannot load what the operator compiled: %v", err)
	}
	t.Logf("%d tenants, %d keys: %d bytes of Secret data (limit %d); gatewayv1.Load took %s",
		len(cfg.Tenants), len(secrets)-1, size, corev1.MaxSecretSize, time.Since(start)) // a measurement, never asserted

	if size <= corev1.MaxSecretSize {
		return
	}
	marked := tooLarge(out, size)
	for name, r := range marked.TenantPlans {
		if r.Reason != v1alpha1.ReasonConfigTooLarge {
			t.Errorf("plan %s: reason %s; want %s", name, r.Reason, v1alpha1.ReasonConfigTooLarge)
		}
	}
	if r := marked.ProviderQuotas["openai"]; r.Reason != v1alpha1.ReasonConfigTooLarge {
		t.Errorf("openai: reason %s; want %s", r.Reason, v1alpha1.ReasonConfigTooLarge)
	}
}

// TestReconcileTooLarge reconciles 5,000 tenants with 20,000 keys on the
// API server. Their configuration does not fit a Secret: Reconcile must
// write none, return no error (a retry cannot help), and mark the plans
// ConfigTooLarge with a Warning event.
func TestReconcileTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 20,000 Secrets on the API server")
	}
	c, ns := newNamespace(t)
	ctx := context.Background()
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
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: c, Recorder: events, SecretName: configSecretName}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var cfg corev1.Secret
	if err := c.Get(ctx, req.NamespacedName, &cfg); !apierrors.IsNotFound(err) {
		t.Errorf("get the configuration Secret: %v; want not found", err)
	}
	var tp v1alpha1.TenantPlan
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: tps[0].Name}, &tp); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(tp.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Reason != v1alpha1.ReasonConfigTooLarge {
		t.Errorf("plan %s Ready = %+v; want reason %s", tp.Name, ready, v1alpha1.ReasonConfigTooLarge)
	}
	if all := events.all(); !strings.Contains(all, "Warning ConfigTooLarge") {
		t.Errorf("events hold no Warning ConfigTooLarge")
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
