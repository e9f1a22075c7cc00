package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RegisterMetricsAdapter makes the aggregator route custom.metrics.k8s.io and
// external.metrics.k8s.io to a metrics adapter listening on localhost:port. EndpointSlices refuse
// loopback addresses, so the Service is an ExternalName for localhost, which the aggregator
// resolves to https://localhost:<port> (with --enable-aggregator-routing off, its default). The
// cluster needs Options.Aggregator. The aggregator does not verify the adapter's certificate,
// which the adapter made itself.
func (c *Cluster) RegisterMetricsAdapter(t testing.TB, port int) {
	t.Helper()
	c.registerMetricsAdapter(t, port, "insecureSkipTLSVerify: true")
}

// RegisterVerifiedMetricsAdapter is RegisterMetricsAdapter with verification on: the APIServices
// have no caBundle until the manager writes the CA of the certificate it issues for
// metrics-adapter.sluice-system.svc, the name the aggregator verifies.
func (c *Cluster) RegisterVerifiedMetricsAdapter(t testing.TB, port int) {
	t.Helper()
	c.registerMetricsAdapter(t, port, "")
}

func (c *Cluster) registerMetricsAdapter(t testing.TB, port int, tls string) {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: sluice-system}
---
apiVersion: v1
kind: Service
metadata: {name: metrics-adapter, namespace: sluice-system}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{port: %d}]
`, port)
	for _, api := range []struct{ version, group string }{{"v1beta1", "custom.metrics.k8s.io"}, {"v1beta2", "custom.metrics.k8s.io"}, {"v1beta1", "external.metrics.k8s.io"}} {
		manifest += fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %[1]s.%[2]s}
spec:
  group: %[2]s
  version: %[1]s
  service: {name: metrics-adapter, namespace: sluice-system, port: %[3]d}
  groupPriorityMinimum: 100
  versionPriority: 100
  %[4]s
`, api.version, api.group, port, tls)
	}
	path := filepath.Join(t.TempDir(), "metrics-adapter.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Kubectl(t, "apply", "-f", path)
}
