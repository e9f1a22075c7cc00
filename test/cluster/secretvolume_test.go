package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// TestMountProjectedFollowsOptionalConfigMaps mounts a Secret and an optional ConfigMap that does
// not exist yet: the ConfigMap's item appears when it is created, changes with it, and goes when
// it is deleted, while the Secret's stays.
func TestMountProjectedFollowsOptionalConfigMaps(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	const ns = "default"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "config"}, StringData: map[string]string{"config.yaml": "kind: GatewayConfig\n"}}
	if _, err := c.Clientset.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c.MountProjected(t, ns, cluster.Projection{Secrets: []string{"config"}, OptionalConfigMaps: []string{"record-0"}}, dir, "config.yaml")
	if got := readItem(t, dir, "config.yaml"); got != "kind: GatewayConfig\n" {
		t.Fatalf("config.yaml = %q; want the Secret's", got)
	}
	if got := readItem(t, dir, "record-0.json"); got != "" {
		t.Fatalf("record-0.json = %q before its ConfigMap exists; want no file", got)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "record-0"}, Data: map[string]string{"record-0.json": `{"v":1}`}}
	cm, err := c.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitItem(t, dir, "record-0.json", `{"v":1}`)
	cm.Data["record-0.json"] = `{"v":2}`
	if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitItem(t, dir, "record-0.json", `{"v":2}`)
	if err := c.Clientset.CoreV1().ConfigMaps(ns).Delete(ctx, "record-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitItem(t, dir, "record-0.json", "")
	if got := readItem(t, dir, "config.yaml"); got != "kind: GatewayConfig\n" {
		t.Errorf("config.yaml = %q after the ConfigMap went; want the Secret's", got)
	}
}

// readItem returns the file of dir named name, or "" when there is none.
func readItem(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitItem waits until the file of dir named name holds want; "" waits until there is none.
func waitItem(t *testing.T, dir, name, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, name+" to hold "+want, func() bool { return readItem(t, dir, name) == want })
}
