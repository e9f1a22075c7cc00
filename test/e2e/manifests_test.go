package e2e

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluicehq/sluice/test/cluster"
)

// TestManifestsApply applies config/default and config/samples to a real API server, as a person
// would with kubectl, and checks, with SubjectAccessReviews, what the manager's and the adapter's
// service accounts, and the HPA controller, may and may not do.
func TestManifestsApply(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/default")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "apply", "--server-side", "-n", "sluice", "-k", "../../config/samples")
	if out := c.Kubectl(t, "get", "pq,tp,hpa", "-n", "sluice"); !strings.Contains(out, "openai") || !strings.Contains(out, "llama") || !strings.Contains(out, "pro") {
		t.Errorf("kubectl get pq,tp shows:\n%s\nwant the samples", out)
	}

	const (
		manager = "system:serviceaccount:sluice:sluice-manager"
		adapter = "system:serviceaccount:sluice:sluice-metrics-adapter"
		hpa     = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	)
	cases := []struct {
		as   string
		verb string
		what authorizationv1.ResourceAttributes
		want bool
	}{
		{manager, "get", authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "sluice"}, true},
		{manager, "update", authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "sluice"}, true},
		{manager, "update", authorizationv1.ResourceAttributes{Group: "sluice.dev", Resource: "providerquotas", Subresource: "status", Namespace: "sluice"}, true},
		{manager, "get", authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "default"}, false},
		{manager, "create", authorizationv1.ResourceAttributes{Resource: "pods", Namespace: "sluice"}, false},
		{manager, "delete", authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
		{adapter, "list", authorizationv1.ResourceAttributes{Resource: "pods", Namespace: "default"}, true},
		{adapter, "watch", authorizationv1.ResourceAttributes{Group: "sluice.dev", Resource: "providerquotas", Namespace: "default"}, true},
		{adapter, "get", authorizationv1.ResourceAttributes{Resource: "configmaps", Name: "extension-apiserver-authentication", Namespace: "kube-system"}, true},
		{adapter, "get", authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "sluice"}, false},
		{hpa, "get", authorizationv1.ResourceAttributes{Group: "custom.metrics.k8s.io", Resource: "pods", Namespace: "default"}, true},
		{hpa, "get", authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "default"}, false},
	}
	for _, tc := range cases {
		what := tc.what
		what.Verb = tc.verb
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tc.as, ResourceAttributes: &what,
			Groups: []string{"system:serviceaccounts", "system:authenticated"},
		}}
		got, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != tc.want {
			t.Errorf("%s may %s %+v: %v; want %v", tc.as, tc.verb, tc.what, got.Status.Allowed, tc.want)
		}
	}
}
