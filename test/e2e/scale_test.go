package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// The scale one Sluice must carry in one namespace.
const (
	scaleTenants        = 5000
	scaleKeysPerTenant  = 4
	scaleTenantsPerPlan = 100
)

// TestOperatorAtScale runs the manager on 5,000 tenants with 20,000 keys, and a gateway on the
// Secrets it writes, mounted as the gateway Deployment's projected volume lays them out: a key
// of any tenant is served, a rotated key takes its old one's place, and a deleted key stops
// working, while the other keys of its tenant go on.
func TestOperatorAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 20,000 Secrets on the API server")
	}
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "create", "namespace", "sluice")
	up := newUpstream(t)
	k8s := newClient(t, c)
	createScaleObjects(t, k8s, up.URL+"/v1")

	api, admin := freeAddr(t), freeAddr(t)
	startManager(t, c, "http://"+admin+"/admin/usage")
	dir := t.TempDir()
	cfg := writeConfigSecret(t, c, dir, up.URL)
	if keys := countKeys(cfg); len(cfg.Tenants) != scaleTenants || keys != scaleTenants*scaleKeysPerTenant {
		t.Fatalf("the gateway's configuration has %d tenants with %d keys; want %d with %d", len(cfg.Tenants), keys, scaleTenants, scaleTenants*scaleKeysPerTenant)
	}
	g := startGatewayOn(t, filepath.Join(dir, "config.yaml"), api, admin)
	for _, tenant := range []int{0, 2500, 4999} {
		if a := g.post(t, "/v1/chat/completions", scaleKey(tenant, 0), chatBody); a.status != http.StatusOK {
			t.Fatalf("a call with tenant %d's key: %d %s", tenant, a.status, a.body)
		}
	}

	rotated := "sk-rotated-tenant-01234-user-1-0123456789abcdef"
	setKey(t, k8s, scaleKeySecret(1234, 1), rotated)
	followConfig(t, c, g, dir, "the rotated key to be served and its old one refused", map[string]int{
		rotated: http.StatusOK, scaleKey(1234, 1): http.StatusUnauthorized,
	})

	deleted := scaleKeySecret(4321, 2)
	if err := k8s.Delete(context.Background(), &deleted); err != nil {
		t.Fatal(err)
	}
	followConfig(t, c, g, dir, "the deleted key to be refused and its tenant's others served", map[string]int{
		scaleKey(4321, 2): http.StatusUnauthorized, scaleKey(4321, 3): http.StatusOK,
	})
}

// followConfig copies the manager's Secrets into dir, as the kubelet refreshes a projected
// volume, until the gateway answers each key with its status.
func followConfig(t *testing.T, c *cluster.Cluster, g *gateway, dir, what string, want map[string]int) {
	t.Helper()
	poll.Until(t, processWait, what, func() bool {
		writeConfigItems(t, dir, configItems(t, c))
		for key, status := range want {
			if g.post(t, "/v1/chat/completions", key, chatBody).status != status {
				return false
			}
		}
		return true
	})
}

// newClient returns a client of the cluster's API server that knows Sluice's kinds.
func newClient(t *testing.T, c *cluster.Cluster) ctrlclient.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := ctrlclient.New(c.Config, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return k8s
}

// createScaleObjects creates, in the namespace sluice, one provider at baseURL with its key, and
// scaleTenants tenants in plans of scaleTenantsPerPlan, each with scaleKeysPerTenant keys. The
// plans carry the terms a real plan does: a budget and per-user and per-tenant limits.
func createScaleObjects(t *testing.T, k8s ctrlclient.Client, baseURL string) {
	t.Helper()
	objs := []ctrlclient.Object{
		&v1alpha1.ProviderQuota{ObjectMeta: metav1.ObjectMeta{Name: "openai"}, Spec: v1alpha1.ProviderQuotaSpec{
			BaseURL:         baseURL,
			Models:          []v1alpha1.Model{{Name: "gpt-4o-mini", Encoding: "o200k_base"}},
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "openai-api-key"},
		}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "openai-api-key", Labels: map[string]string{v1alpha1.LabelProvider: "openai"}},
			Data:       map[string][]byte{v1alpha1.KeySecretItem: []byte(sampleProviderKey)},
		},
	}
	for p := range scaleTenants / scaleTenantsPerPlan {
		plan := &v1alpha1.TenantPlan{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plan-%03d", p)}, Spec: v1alpha1.TenantPlanSpec{
			Providers: []string{"openai"},
			Budget:    &v1alpha1.Budget{Amount: "100", Period: v1alpha1.BudgetPeriodMonth},
			TimeZone:  "Europe/Berlin",
			PerUser:   []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 60, Per: v1alpha1.PeriodMinute}},
			PerTenant: []v1alpha1.Limit{{Dimension: v1alpha1.DimensionTokens, Amount: 1000000, Per: v1alpha1.PeriodDay}},
		}}
		for tenant := p * scaleTenantsPerPlan; tenant < (p+1)*scaleTenantsPerPlan; tenant++ {
			plan.Spec.Tenants = append(plan.Spec.Tenants, scaleTenant(tenant))
			for user := range scaleKeysPerTenant {
				secret := scaleKeySecret(tenant, user)
				objs = append(objs, &secret)
			}
		}
		objs = append(objs, plan)
	}
	createAll(t, k8s, objs)
}

func scaleTenant(tenant int) string { return fmt.Sprintf("tenant-%05d", tenant) }

// scaleKey is the key of one of a tenant's users.
func scaleKey(tenant, user int) string {
	return fmt.Sprintf("sk-%s-user-%d-0123456789abcdef0123456789", scaleTenant(tenant), user)
}

// scaleKeySecret is the Secret of scaleKey.
func scaleKeySecret(tenant, user int) corev1.Secret {
	name, userName := scaleTenant(tenant), fmt.Sprintf("user-%d", user)
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + userName, Namespace: "sluice",
			Labels: map[string]string{v1alpha1.LabelTenant: name, v1alpha1.LabelUser: userName}},
		Data: map[string][]byte{v1alpha1.KeySecretItem: []byte(scaleKey(tenant, user))},
	}
}

// setKey replaces the key a key Secret holds.
func setKey(t *testing.T, k8s ctrlclient.Client, secret corev1.Secret, key string) {
	t.Helper()
	patch := ctrlclient.MergeFrom(secret.DeepCopy())
	secret.Data = map[string][]byte{v1alpha1.KeySecretItem: []byte(key)}
	if err := k8s.Patch(context.Background(), &secret, patch); err != nil {
		t.Fatal(err)
	}
}

// createAll creates objs in the namespace sluice, eight at a time.
func createAll(t *testing.T, k8s ctrlclient.Client, objs []ctrlclient.Object) {
	t.Helper()
	work := make(chan ctrlclient.Object)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				o.SetNamespace("sluice")
				if err := k8s.Create(context.Background(), o); err != nil {
					select {
					case errs <- fmt.Errorf("create %s: %w", o.GetName(), err):
					default:
					}
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// countKeys counts the keys of every tenant of cfg.
func countKeys(cfg *gatewayv1.Config) int {
	n := 0
	for _, tenant := range cfg.Tenants {
		n += len(tenant.Keys)
	}
	return n
}
