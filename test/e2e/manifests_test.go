package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/cluster"
)

// TestManifestsApply applies config/default and config/samples to a real API server, as a person
// would with kubectl, and checks what the manager's service account may and may not do.
func TestManifestsApply(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/default")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "apply", "--server-side", "-n", "sluice", "-k", "../../config/samples")
	if out := c.Kubectl(t, "get", "pq,tp", "-n", "sluice"); !strings.Contains(out, "openai") || !strings.Contains(out, "pro") {
		t.Errorf("kubectl get pq,tp shows:\n%s\nwant the samples", out)
	}

	manager := "system:serviceaccount:sluice:sluice-manager"
	cases := []struct {
		verb, resource, namespace string
		want                      string
	}{
		{"get", "secrets", "sluice", "yes"},
		{"update", "secrets", "sluice", "yes"},
		{"update", "providerquotas.sluice.dev --subresource=status", "sluice", "yes"},
		{"get", "secrets", "default", "no"},
		{"create", "pods", "sluice", "no"},
		{"delete", "customresourcedefinitions", "", "no"},
	}
	for _, tc := range cases {
		args := append([]string{"auth", "can-i", tc.verb}, strings.Fields(tc.resource)...)
		args = append(args, "--as", manager)
		if tc.namespace != "" {
			args = append(args, "-n", tc.namespace)
		}
		if got := canI(t, c, args...); got != tc.want {
			t.Errorf("the manager can %s %s in %q: %s; want %s", tc.verb, tc.resource, tc.namespace, got, tc.want)
		}
	}
}

// canI runs kubectl auth can-i, which exits 1 for "no", and returns its answer.
func canI(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	dir, err := cluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).Output()
	return strings.TrimSpace(string(out))
}
