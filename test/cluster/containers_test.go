package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// recordingT keeps the errors a ContainerRunner reports, so that a test can expect them.
type recordingT struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingT) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingT) recorded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// checkContainer is a shell script that exits with a distinct code for each thing a container
// should see and does not, and otherwise sleeps.
const checkContainer = `
test "$(cat /etc/greeting/greeting)" = hello || exit 11
test -L /etc/greeting/..data || exit 12
test "$1" = runner-test || exit 13
test "$GREETING" = hello || exit 14
test "$(hostname)" = runner-test || exit 15
test -n "$KUBERNETES_SERVICE_HOST" || exit 16
touch /etc/greeting/x 2>/dev/null && exit 17
test -s /var/run/secrets/kubernetes.io/serviceaccount/token || exit 18
grep -q "BEGIN CERTIFICATE" /var/run/secrets/kubernetes.io/serviceaccount/ca.crt || exit 19
test "$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)" = default || exit 20
test -z "$KUBEBUILDER_ASSETS" || exit 21
exec sleep 600
`

// TestRunContainersAsAKubeletWould runs a Pod whose container checks what it sees, its Secret
// created only after the Pod, and a Pod whose container exits, and checks what each reports.
func TestRunContainersAsAKubeletWould(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ControllerManager: true})
	ctx := context.Background()
	rt := &recordingT{TB: t}
	c.RunContainers(rt, "default", labels.SelectorFromSet(labels.Set{"test": "runner"}), cluster.Images{"shell": {Binary: "/bin/sh"}})
	poll.Until(t, settle, "the default ServiceAccount", func() bool {
		_, err := c.Clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	pods := c.Clientset.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, shellPod("runner-test", checkContainer), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, settle, "the Pod to wait for its Secret", func() bool {
		pod, err := pods.Get(ctx, "runner-test", metav1.GetOptions{})
		return err == nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Waiting != nil &&
			pod.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "greeting"}, StringData: map[string]string{"greeting": "hello"}}
	if _, err := c.Clientset.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, settle, "the Pod to be Ready", func() bool {
		pod, err := pods.Get(ctx, "runner-test", metav1.GetOptions{})
		return err == nil && ready(pod) || rt.recorded() != ""
	})
	if got := rt.recorded(); got != "" {
		t.Fatalf("the checking container failed:\n%s", got)
	}

	if _, err := pods.Create(ctx, shellPod("runner-crash", "echo about to fail; exit 3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, settle, "the exiting container to be restarted", func() bool {
		pod, err := pods.Get(ctx, "runner-crash", metav1.GetOptions{})
		if err != nil || len(pod.Status.ContainerStatuses) != 1 {
			return false
		}
		s := pod.Status.ContainerStatuses[0]
		return s.RestartCount >= 2 && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode == 3
	})
	if got := rt.recorded(); !strings.Contains(got, "runner-crash, container main exited with 3") || !strings.Contains(got, "about to fail") {
		t.Errorf("the runner reported %q; want the exit and the container's output", got)
	}
}

// shellPod is a Pod of one shell container running script with the Pod's name as $1, its
// environment holding the Secret greeting's key, and the Secret mounted read-only.
func shellPod(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"test": "runner"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: "shell:1",
				Args: []string{"-c", script, "sh", "$(POD_NAME)"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "greeting"}, Key: "greeting", Optional: ptr.To(true)}}},
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: "greeting", MountPath: "/etc/greeting", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			}},
			Volumes: []corev1.Volume{{Name: "greeting", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "greeting"}}}},
		},
	}
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
