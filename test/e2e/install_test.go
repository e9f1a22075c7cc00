package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/testcert"
)

// preservingCRD is the least of a CRD that takes any object of its kind, so that the objects of
// an optional component (the Prometheus Operator's, cert-manager's) are really applied.
func preservingCRD(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: %[4]s}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, kind, plural, strings.ToLower(kind))
}

// applyOptionalCRDs applies the CRDs of the PrometheusRule, cert-manager's Issuer and Certificate,
// and waits until the API server serves them.
func applyOptionalCRDs(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	crds := []string{
		preservingCRD("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
		preservingCRD("cert-manager.io", "Issuer", "issuers"),
		preservingCRD("cert-manager.io", "Certificate", "certificates"),
	}
	for _, crd := range crds {
		c.Kubectl(t, "apply", "--server-side", "-f", writeManifest(t, crd))
	}
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/prometheusrules.monitoring.coreos.com", "crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io")
}

// checkGatewayNetworkPolicy checks that the gateways' NetworkPolicy leaves the clients' port open
// and lets only the manager, the adapter and Prometheus reach the admin port.
func checkGatewayNetworkPolicy(t *testing.T, c *cluster.Cluster, namespace, name string) {
	t.Helper()
	np, err := c.Clientset.NetworkingV1().NetworkPolicies(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("networkpolicy %s/%s: %v", namespace, name, err)
	}
	var open, admin []networkingv1.NetworkPolicyIngressRule
	for _, rule := range np.Spec.Ingress {
		switch {
		case hasPort(rule, "http"):
			open = append(open, rule)
		case hasPort(rule, "admin"):
			admin = append(admin, rule)
		}
	}
	if len(open) != 1 || len(open[0].From) != 0 || len(admin) != 1 {
		t.Fatalf("networkpolicy %s/%s: ingress %+v; want the http port from anywhere and one rule for the admin port", namespace, name, np.Spec.Ingress)
	}
	var peers []string
	for _, from := range admin[0].From {
		if from.PodSelector == nil || from.IPBlock != nil {
			t.Errorf("networkpolicy %s/%s: the admin port admits %+v; want Pods only", namespace, name, from)
			continue
		}
		if from.NamespaceSelector != nil && len(from.NamespaceSelector.MatchLabels)+len(from.NamespaceSelector.MatchExpressions) == 0 {
			t.Errorf("networkpolicy %s/%s: the admin port admits %v in any namespace; want one namespace", namespace, name, from.PodSelector.MatchLabels)
		}
		peers = append(peers, from.PodSelector.MatchLabels["app.kubernetes.io/name"])
	}
	if want := []string{"sluice-manager", "sluice-metrics-adapter", "prometheus"}; !slices.Equal(peers, want) {
		t.Errorf("networkpolicy %s/%s: the admin port admits %v; want %v", namespace, name, peers, want)
	}
}

func hasPort(rule networkingv1.NetworkPolicyIngressRule, name string) bool {
	return slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
		return p.Port != nil && *p.Port == intstr.FromString(name)
	})
}

// checkAdapterAvailability checks that the metrics adapter runs two replicas under a
// PodDisruptionBudget.
func checkAdapterAvailability(t *testing.T, c *cluster.Cluster, namespace, name string) {
	t.Helper()
	d, err := c.Clientset.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *d.Spec.Replicas; got != 2 {
		t.Errorf("deployment %s/%s: %d replicas; want 2", namespace, name, got)
	}
	pdb, err := c.Clientset.PolicyV1().PodDisruptionBudgets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("poddisruptionbudget %s/%s: %v", namespace, name, err)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "sluice-metrics-adapter" {
		t.Errorf("poddisruptionbudget %s/%s: %+v; want one adapter unavailable at most", namespace, name, pdb.Spec)
	}
}

// apiServiceTLS is how the aggregator is told to verify the adapter.
type apiServiceTLS struct {
	Insecure     bool
	CABundle     []byte
	InjectCAFrom string
}

// checkAPIServicesTLS checks that both of the adapter's APIServices verify it as want says.
func checkAPIServicesTLS(t *testing.T, c *cluster.Cluster, want apiServiceTLS) {
	t.Helper()
	for _, name := range []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"} {
		var s struct {
			Metadata struct{ Annotations map[string]string }
			Spec     struct {
				InsecureSkipTLSVerify bool
				CABundle              []byte
			}
		}
		if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "apiservice", name, "-o", "json")), &s); err != nil {
			t.Fatal(err)
		}
		got := apiServiceTLS{Insecure: s.Spec.InsecureSkipTLSVerify, CABundle: s.Spec.CABundle, InjectCAFrom: s.Metadata.Annotations["cert-manager.io/inject-ca-from"]}
		if got.Insecure != want.Insecure || !bytes.Equal(got.CABundle, want.CABundle) || got.InjectCAFrom != want.InjectCAFrom {
			t.Errorf("apiservice %s verifies the adapter by %+v; want %+v", name, got, want)
		}
	}
}

// adapterMountsSecret reports whether the adapter's Deployment serves the certificate of a Secret.
func adapterMountsSecret(t *testing.T, c *cluster.Cluster, namespace, name, secret string) bool {
	t.Helper()
	d, err := c.Clientset.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	mounted := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret })
	return mounted && slices.ContainsFunc(pod.Containers[0].Args, func(a string) bool { return a == "--tls-cert-file=/var/run/sluice-serving-cert/tls.crt" })
}

// testCA returns the PEM of a throwaway CA, as a caBundle holds it.
func testCA(t *testing.T) []byte {
	t.Helper()
	ca, _, err := testcert.New(&x509.Certificate{Subject: pkix.Name{CommonName: "sluice test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
}

// restrictedLabels are the labels of a namespace that enforces, audits and warns of the
// restricted Pod Security Standard.
var restrictedLabels = []string{
	"pod-security.kubernetes.io/enforce=restricted",
	"pod-security.kubernetes.io/audit=restricted",
	"pod-security.kubernetes.io/warn=restricted",
}

// checkRestricted checks that a namespace carries restrictedLabels and that the API server admits
// there, in a dry run, a Pod of each Deployment's template, as the ReplicaSet controller would
// create it. So that the check is seen to bite, a Pod whose container may escalate its
// privileges must be refused.
func checkRestricted(t *testing.T, c *cluster.Cluster, namespace string, deployments map[string]*appsv1.Deployment) {
	t.Helper()
	ns, err := c.Clientset.CoreV1().Namespaces().Get(context.Background(), namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range restrictedLabels {
		key, value, _ := strings.Cut(label, "=")
		if got := ns.Labels[key]; got != value {
			t.Errorf("namespace %s is labelled %s=%q; want %s", namespace, key, got, value)
		}
	}
	if len(deployments) == 0 {
		t.Fatalf("namespace %s: no Deployments to check", namespace)
	}
	for _, name := range slices.Sorted(maps.Keys(deployments)) {
		if err := createPodDryRun(c, namespace, deployments[name].Spec.Template); err != nil {
			t.Errorf("a Pod of deployment %s/%s: %v", namespace, name, err)
		}
	}
	escalating := deployments[slices.Sorted(maps.Keys(deployments))[0]].Spec.Template.DeepCopy()
	escalating.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	if err := createPodDryRun(c, namespace, *escalating); err == nil || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("namespace %s admits a Pod that may escalate its privileges (%v); want PodSecurity to refuse it", namespace, err)
	}
}

// createPodDryRun asks the API server to create a Pod of a template, without keeping it.
func createPodDryRun(c *cluster.Cluster, namespace string, template corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "dry-run-", Namespace: namespace, Labels: template.Labels, Annotations: template.Annotations},
		Spec:       template.Spec,
	}
	_, err := c.Clientset.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
