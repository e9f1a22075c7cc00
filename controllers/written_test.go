package controllers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// loadWritten reads the configuration's Secrets in namespace ns and the
// record's ConfigMaps that exist, projects their items into one new
// directory as the gateway Deployment's volume does, and loads config.yaml
// from it with the gateways' own loader.
func loadWritten(t *testing.T, c client.Client, ns string) (*gatewayv1.Config, error) {
	t.Helper()
	var secrets []*corev1.Secret
	for _, name := range ConfigSecretNames(configSecretName) {
		var s corev1.Secret
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return nil, err
		}
		secrets = append(secrets, &s)
	}
	var cms []*corev1.ConfigMap
	for _, name := range RecordConfigMapNames(configSecretName) {
		var cm corev1.ConfigMap
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
		switch {
		case apierrors.IsNotFound(err): // optional in the volume
		case err != nil:
			return nil, err
		default:
			cms = append(cms, &cm)
		}
	}
	dir := t.TempDir()
	project(t, dir, secrets)
	projectConfigMaps(t, dir, cms)
	return gatewayv1.Load(filepath.Join(dir, ConfigFile))
}

// mustLoadWritten is loadWritten that fails the test on an error.
func mustLoadWritten(t *testing.T, c client.Client, ns string) *gatewayv1.Config {
	t.Helper()
	cfg, err := loadWritten(t, c, ns)
	if err != nil {
		t.Fatalf("load the written configuration: %v", err)
	}
	return cfg
}

// loadProjected writes the items of secrets into one new directory and
// loads its config.yaml with gatewayv1.Load.
func loadProjected(t *testing.T, secrets []*corev1.Secret) (*gatewayv1.Config, error) {
	t.Helper()
	dir := t.TempDir()
	project(t, dir, secrets)
	return gatewayv1.Load(filepath.Join(dir, ConfigFile))
}

// project writes the items of secrets into dir, as a projected volume
// mounts them.
func project(tb testing.TB, dir string, secrets []*corev1.Secret) {
	tb.Helper()
	for _, s := range secrets {
		for item, data := range s.Data {
			if err := os.WriteFile(filepath.Join(dir, item), data, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
