package cluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluicehq/sluice/test/cluster"
)

// TestEnvtestUsesTheLocalControlPlane proves that controller-runtime's envtest, as controller
// tests use it, runs on the binaries hack/ builds, with RBAC enforced.
func TestEnvtestUsesTheLocalControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local control plane; skipped with -short")
	}
	assets, err := cluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { env.Stop() })
	ctx := context.Background()

	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "default"}, StringData: map[string]string{"apiKey": "x"}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatalf("admin creates a Secret: %v", err)
	}

	user, err := env.AddUser(envtest.User{Name: "nobody"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := client.New(user.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = nobody.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a user without roles reads a Secret: err = %v; want Forbidden", err)
	}
}
