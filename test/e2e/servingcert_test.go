package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

const (
	// servingCertSecret is the Secret the manager fills, as both install paths name it.
	servingCertSecret = "sluice-serving-cert"
	// adapterServiceName and managerMetricsName are the names the certificate is for: the
	// aggregator verifies the first, a scraper of the manager's metrics the second.
	adapterServiceName = "metrics-adapter.sluice-system.svc"
	managerMetricsName = "sluice-manager-metrics.sluice-system.svc"
)

var adapterAPIServices = []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"}

// TestManagerIssuesTheServingCertificate runs the manager as the install paths do, issuing the
// serving certificate into an empty Secret, and the metrics adapter serving it from the Secret
// mounted as files, with the APIServices verifying TLS: the aggregator reaches the adapter only
// once the manager has written its CA into their caBundle. The manager's own /metrics is served
// with the same certificate, to callers the API server authenticates and authorizes.
func TestManagerIssuesTheServingCertificate(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Aggregator: true})
	ctx := t.Context()
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "apply", "-f", writeManifest(t, `apiVersion: v1
kind: Namespace
metadata: {name: sluice-system}
---
apiVersion: v1
kind: Secret
metadata: {name: `+servingCertSecret+`, namespace: sluice-system}
type: Opaque
`))
	_, port, _ := net.SplitHostPort(freeAddr(t))
	adapterPort, _ := strconv.Atoi(port)
	c.RegisterVerifiedMetricsAdapter(t, adapterPort)

	certDir := t.TempDir()
	c.MountSecrets(t, "sluice-system", []string{servingCertSecret}, certDir, "")
	metricsAddr := freeAddr(t)
	startManager(t, c, "http://"+freeAddr(t)+"/admin/usage",
		"--metrics-bind-address", metricsAddr, "--metrics-cert-dir", certDir,
		"--issue-serving-cert", "--serving-cert-secret", servingCertSecret, "--serving-cert-namespace", "sluice-system",
		"--serving-cert-dns-names", adapterServiceName+","+managerMetricsName,
		"--ca-inject-apiservices", strings.Join(adapterAPIServices, ","))

	// The manager fills the Secret; the kubelet (here, MountSecrets) writes it into files.
	poll.Until(t, settle, "the serving certificate in the mounted Secret", func() bool {
		_, err := os.Stat(filepath.Join(certDir, "tls.key"))
		return err == nil
	})
	startVerifiedAdapter(t, c, adapterPort, certDir)

	apiServices, err := aggregator.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ca := readFile(t, filepath.Join(certDir, "ca.crt"))
	for _, name := range adapterAPIServices {
		poll.Until(t, settle, name+" available, verified with the manager's CA", func() bool {
			s, err := apiServices.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
			return err == nil && bytes.Equal(s.Spec.CABundle, ca) && !s.Spec.InsecureSkipTLSVerify && available(s)
		})
	}
	c.Kubectl(t, "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1")
	checkCertificate(t, ca, readFile(t, filepath.Join(certDir, "tls.crt")))

	checkManagerMetrics(t, c, metricsAddr, ca)
}

// startVerifiedAdapter runs the metrics adapter serving the certificate in certDir.
func startVerifiedAdapter(t *testing.T, c *cluster.Cluster, port int, certDir string) *proc.Process {
	t.Helper()
	cmd := exec.Command(adapterBin,
		"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--tls-cert-file="+filepath.Join(certDir, "tls.crt"), "--tls-private-key-file="+filepath.Join(certDir, "tls.key"),
		"--lister-kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--gateway-selector="+gatewaySelector, "--v=2")
	return proc.Start(t, "metrics-adapter", cmd)
}

func available(s *apiregistrationv1.APIService) bool {
	for _, cond := range s.Status.Conditions {
		if cond.Type == apiregistrationv1.Available {
			return cond.Status == apiregistrationv1.ConditionTrue
		}
	}
	return false
}

// checkCertificate checks that the CA signs a serving certificate for both names.
func checkCertificate(t *testing.T, caPEM, certPEM []byte) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("tls.crt holds no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{adapterServiceName, managerMetricsName} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate for %s: %v", name, err)
		}
	}
}

// checkManagerMetrics scrapes the manager's /metrics verifying its certificate, as a ServiceMonitor
// does: without a token it is refused, with the token of a service account that may not get
// /metrics it is forbidden, and with one bound to the scraper's ClusterRole it is served.
func checkManagerMetrics(t *testing.T, c *cluster.Cluster, addr string, caPEM []byte) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: managerMetricsName}}}
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp.StatusCode, body.String()
	}
	// The certificate reaches the manager at the mounted volume's next sync: until then the
	// handshake fails.
	poll.Until(t, settle, "the manager's /metrics over verified TLS", func() bool {
		code, _ := scrape("")
		return code != 0
	})
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d %.200s; want 401", code, body)
	}
	if code, body := scrape(serviceAccountToken(t, c, "stranger", false)); code != http.StatusForbidden {
		t.Errorf("/metrics as a service account that may not get it: %d %.200s; want 403", code, body)
	}
	code, body := scrape(serviceAccountToken(t, c, "prometheus", true))
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
		t.Errorf("/metrics as the scraper: %d %.200s; want 200 with the controllers' metrics", code, body)
	}
}

// serviceAccountToken creates the service account name in sluice-system, bound to a ClusterRole
// that may get /metrics if scraper, and returns a token of it.
func serviceAccountToken(t *testing.T, c *cluster.Cluster, name string, scraper bool) string {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Clientset.CoreV1().ServiceAccounts("sluice-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if scraper {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		if _, err := c.Clientset.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "sluice-system"}},
		}
		if _, err := c.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token, err := c.Clientset.CoreV1().ServiceAccounts("sluice-system").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return token.Status.Token
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestNoDefaultSkipsVerification renders both install paths with their defaults, the
// ServiceMonitors on, and finds no APIService or scrape that skips verifying a certificate.
func TestNoDefaultSkipsVerification(t *testing.T) {
	skipWithoutHelm(t)
	assets, err := cluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]string{}
	chart, err := helm(t, "template", "sluice", "charts/sluice", "--namespace", "sluice-system", "--set", "serviceMonitor.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, chart)
	}
	rendered["the chart"] = chart
	for _, components := range [][]string{nil, {"servicemonitor"}} {
		out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", overlay(t, components, "", map[string]string{})).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl kustomize config/default with %v: %v\n%s", components, err, out)
		}
		rendered[fmt.Sprintf("config/default with %v", components)] = string(out)
	}
	for what, manifests := range rendered {
		for _, skip := range []string{"insecureSkipTLSVerify", "insecureSkipVerify"} {
			if strings.Contains(manifests, skip) {
				t.Errorf("%s says %s", what, skip)
			}
		}
		if !strings.Contains(manifests, "--issue-serving-cert") {
			t.Errorf("%s: the manager does not issue the serving certificate", what)
		}
	}
}
