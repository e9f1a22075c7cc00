package cluster_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// TestAggregatorPublishesTheFrontProxyCA checks what an extension API server reads to trust the
// aggregator: kube-apiserver publishes the front-proxy CA and the name its client certificate must
// carry.
func TestAggregatorPublishesTheFrontProxyCA(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Aggregator: true})
	var cm *corev1.ConfigMap
	poll.Until(t, settle, "kube-apiserver to publish extension-apiserver-authentication", func() bool {
		var err error
		cm, err = c.Clientset.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
		return err == nil && cm.Data["requestheader-client-ca-file"] != ""
	})
	if ca := cm.Data["requestheader-client-ca-file"]; !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Errorf("requestheader-client-ca-file = %q; want the front-proxy CA", ca)
	}
	if names := cm.Data["requestheader-allowed-names"]; names != `["front-proxy-client"]` {
		t.Errorf("requestheader-allowed-names = %s; want [\"front-proxy-client\"]", names)
	}
}
