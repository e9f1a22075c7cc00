package e2e

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/test/cluster"
)

// adminTokenFlags are the flags that name the admin token's file, by component.
var adminTokenFlags = map[string]string{
	"sluice-gateway":         "--admin-token-file=",
	"sluice-manager":         "--gateway-admin-token-file=",
	"sluice-metrics-adapter": "--gateway-admin-token-file=",
}

// checkAdminTokenMounted checks that each Deployment, found by its app.kubernetes.io/name, names
// the admin token's file in its flag and mounts that file from the key token of secret, and
// nothing else of it.
func checkAdminTokenMounted(t *testing.T, deployments map[string]*appsv1.Deployment, secret string) {
	t.Helper()
	for _, d := range deployments {
		component := d.Spec.Template.Labels["app.kubernetes.io/name"]
		if problem := adminTokenProblem(d, adminTokenFlags[component], secret); problem != "" {
			t.Errorf("deployment %s/%s: %s", d.Namespace, d.Name, problem)
		}
	}
}

// adminTokenProblem says what is wrong with how a Deployment mounts the admin token, or "".
func adminTokenProblem(d *appsv1.Deployment, flag, secret string) string {
	spec := d.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, flag) })
	if flag == "" || i < 0 {
		return "no flag " + flag + " naming the admin token's file"
	}
	file := strings.TrimPrefix(spec.Containers[0].Args[i], flag)
	m := slices.IndexFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path.Dir(file) })
	if m < 0 {
		return "nothing mounted at " + path.Dir(file)
	}
	mount := spec.Containers[0].VolumeMounts[m]
	v := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if v < 0 || spec.Volumes[v].Secret == nil {
		return "the admin token's mount " + mount.Name + " is no Secret's"
	}
	src := spec.Volumes[v].Secret
	if src.SecretName != secret || len(src.Items) != 1 || src.Items[0].Key != "token" || src.Items[0].Path != path.Base(file) || !mount.ReadOnly {
		return "the admin token is mounted from " + src.SecretName + " " + toJSON(src.Items) + "; want the key token of " + secret + ", read-only, at " + file
	}
	return ""
}

// checkGatewayMonitorSendsToken checks that the gateways' ServiceMonitor scrapes with the admin
// token of secret, as the Prometheus Operator reads it.
func checkGatewayMonitorSendsToken(t *testing.T, c *cluster.Cluster, namespace, name, secret string) {
	t.Helper()
	var monitor serviceMonitor
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "servicemonitor", name, "-n", namespace, "-o", "json")), &monitor); err != nil {
		t.Fatal(err)
	}
	checkMonitorAuthorization(t, monitor, secret)
}

// serviceMonitor is what the tests read of a ServiceMonitor.
type serviceMonitor struct {
	Spec struct {
		Endpoints []struct {
			Port          string `json:"port"`
			Authorization *struct {
				Type        string `json:"type"`
				Credentials struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func checkMonitorAuthorization(t *testing.T, monitor serviceMonitor, secret string) {
	t.Helper()
	eps := monitor.Spec.Endpoints
	if len(eps) != 1 || eps[0].Port != "admin" {
		t.Fatalf("the gateways' ServiceMonitor scrapes %s; want the admin port", toJSON(eps))
	}
	a := eps[0].Authorization
	if secret == "" {
		if a != nil {
			t.Errorf("the gateways' ServiceMonitor sends %s; want no token", toJSON(a))
		}
		return
	}
	if a == nil || a.Type != "Bearer" || a.Credentials.Name != secret || a.Credentials.Key != "token" {
		t.Errorf("the gateways' ServiceMonitor sends %s; want the Bearer token of %s's key token", toJSON(a), secret)
	}
}

// adminTokenOf reads the token of a Secret made for the gateways' admin endpoints, and fails if
// it is too short to guess at.
func adminTokenOf(t *testing.T, c *cluster.Cluster, namespace, name string) string {
	t.Helper()
	s, err := c.Clientset.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the admin token's Secret: %v", err)
	}
	token := string(s.Data["token"])
	if len(token) < 32 {
		t.Errorf("the Secret %s/%s holds a token of %d characters; want at least 32", namespace, name, len(token))
	}
	return token
}

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestChartServiceMonitorSendsTheAdminToken renders the gateways' ServiceMonitor with the token
// of the chart's Secret, of a Secret of one's own, and with none.
func TestChartServiceMonitorSendsTheAdminToken(t *testing.T) {
	skipWithoutHelm(t)
	for _, tc := range []struct {
		set, secret string
	}{
		{"serviceMonitor.enabled=true", "sluice-gateway-admin-token"},
		{"serviceMonitor.enabled=true,gateway.adminToken.existingSecret=admin-token", "admin-token"},
		{"serviceMonitor.enabled=true,gateway.adminToken.enabled=false", ""},
	} {
		out, err := helm(t, "template", "sluice", "charts/sluice", "-s", "templates/servicemonitor.yaml", "--set", tc.set)
		if err != nil {
			t.Fatalf("helm template --set %s: %v\n%s", tc.set, err, out)
		}
		checkMonitorAuthorization(t, gatewayMonitor(t, out), tc.secret)
	}
}

// gatewayMonitor finds the gateways' ServiceMonitor in what helm template rendered.
func gatewayMonitor(t *testing.T, rendered string) serviceMonitor {
	t.Helper()
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var monitor struct {
			Kind     string
			Metadata struct{ Name string }
			serviceMonitor
		}
		if err := yaml.Unmarshal([]byte(doc), &monitor); err != nil {
			t.Fatal(err)
		}
		if monitor.Kind == "ServiceMonitor" && monitor.Metadata.Name == "sluice-gateway" {
			return monitor.serviceMonitor
		}
	}
	t.Fatalf("no ServiceMonitor sluice-gateway in\n%s", rendered)
	return serviceMonitor{}
}

// TestChartMountsTheAdminToken renders the chart with the admin token of its own Secret, of a
// Secret of one's own, and with none: each component mounts the one named, the chart makes a
// Secret only for its own token, and with none no component names a token.
func TestChartMountsTheAdminToken(t *testing.T) {
	skipWithoutHelm(t)
	own := renderObjects(t)
	checkAdminTokenMounted(t, own.deployments, "sluice-gateway-admin-token")
	mine := renderObjects(t, "--set", "gateway.adminToken.existingSecret=admin-token")
	checkAdminTokenMounted(t, mine.deployments, "admin-token")
	for set, want := range map[string]int{"": 1, "manager.watchNamespace=team-a": 2, "gateway.adminToken.existingSecret=admin-token": 0, "gateway.adminToken.enabled=false": 0} {
		out, err := helm(t, "template", "sluice", "charts/sluice", "--namespace", "sluice-system", "--set", set)
		if err != nil {
			t.Fatalf("helm template --set %s: %v\n%s", set, err, out)
		}
		if got := strings.Count(out, "kind: Secret\nmetadata:\n  name: sluice-gateway-admin-token\n"); got != want {
			t.Errorf("helm template --set %s renders %d Secrets sluice-gateway-admin-token; want %d", set, got, want)
		}
		if set == "gateway.adminToken.enabled=false" && strings.Contains(out, "admin-token") {
			t.Errorf("with gateway.adminToken.enabled=false, the chart still names an admin token")
		}
	}
}
