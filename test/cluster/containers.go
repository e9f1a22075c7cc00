package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/sluicehq/sluice/test/proc"
)

const (
	// restartBackoff is the wait before a container that exited is started again, doubled at each
	// exit up to maxRestartBackoff; a kubelet starts at 10 s and stops at 5 minutes.
	restartBackoff, maxRestartBackoff = time.Second, 30 * time.Second
	// stderrTail is how much of an exited container's output the test log shows.
	stderrTail = 4000
)

// Image is the local program that plays the containers of one image.
type Image struct {
	// Binary is the program the image's entrypoint runs.
	Binary string
	// BindAddressFlag, when set, is a flag the runner adds with the Pod's address (as
	// --bind-address=127.x.y.z) for a program that otherwise listens on every address of the
	// host, where two replicas would take the same port.
	BindAddressFlag string
}

// Images maps an image's repository, without its tag or digest, to the program that plays it.
type Images map[string]Image

// ContainerRunner plays the kubelet for the Pods of one selector by running their containers as
// local processes, as the Pod's manifest says:
//
//   - the program of the container's image (Images), its command and args with $(VAR) expanded as
//     Kubernetes does, and its environment: value, valueFrom (secretKeyRef, configMapKeyRef,
//     fieldRef, resourceFieldRef), envFrom, KUBERNETES_SERVICE_HOST and _PORT pointing at the
//     test's API server, HOSTNAME, and nothing of the test's own environment;
//   - its volumes (secret, configMap, projected with serviceAccountToken from the TokenRequest
//     API, downwardAPI, emptyDir) written as the kubelet writes them, into directories swapped
//     whole through a "..data" symlink and kept in sync with their sources; a Pod whose
//     non-optional Secret or ConfigMap is missing waits, as in ContainerCreating, until it appears;
//   - each container in a mount and a UTS namespace of its own (see podinit), with each volume
//     bound at its mountPath (readOnly honoured), the root read-only when readOnlyRootFilesystem
//     says so, and the Pod's name as its hostname;
//   - its readiness probe (httpGet, tcpSocket, exec) deciding whether it is ready; the Pod is
//     Ready when all its containers are. Liveness and startup probes are not run;
//   - restartPolicy Always: a container that exits is started again after a backoff, its
//     restartCount and last termination recorded in the Pod's status, and the test fails with the
//     tail of its output, since every container Sluice ships is a server that should not exit.
//
// The Pods share the host's network, each on a loopback address of its own (127.N.x.y). That is
// where the runner departs from a kubelet: an argument whose value is a listen address without a
// host (":8080", "--listen=:8080") becomes "<podIP>:8080", and an Image's BindAddressFlag is
// added, since two replicas could not both listen on every address of one host.
//
// The test runs as root: the namespaces and bind mounts need it. The Pods' init containers,
// securityContext users and resource limits are not applied. ContainerRunner stops its processes
// when the test ends; it is safe for concurrent use.
type ContainerRunner struct {
	cluster   *Cluster
	t         testing.TB
	namespace string
	selector  labels.Selector
	images    Images
	podinit   string
	root      string

	mu   sync.Mutex
	pods map[types.UID]*runningPod
}

// RunContainers starts a ContainerRunner for the Pods of namespace that selector selects.
func (c *Cluster) RunContainers(t testing.TB, namespace string, selector labels.Selector, images Images) *ContainerRunner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cluster: RunContainers runs each container in mount namespaces of its own, which needs root")
	}
	podinit, err := buildPodinit()
	if err != nil {
		t.Fatal(err)
	}
	r := &ContainerRunner{cluster: c, t: t, namespace: namespace, selector: selector, images: images,
		podinit: podinit, root: t.TempDir(), pods: map[types.UID]*runningPod{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		r.stopAllBut(nil)
	})
	return r
}

var podinitBuild struct {
	once sync.Once
	path string
	err  error
}

// buildPodinit builds test/cluster/podinit once for the test binary.
func buildPodinit() (string, error) {
	podinitBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-podinit")
		if err != nil {
			podinitBuild.err = err
			return
		}
		podinitBuild.path = filepath.Join(dir, "podinit")
		out, err := exec.Command("go", "build", "-o", podinitBuild.path, "github.com/sluicehq/sluice/test/cluster/podinit").CombinedOutput()
		if err != nil {
			podinitBuild.err = fmt.Errorf("cluster: build podinit: %v\n%s", err, out)
		}
	})
	return podinitBuild.path, podinitBuild.err
}

func (r *ContainerRunner) run(ctx context.Context) {
	ticker := time.NewTicker(kubeletSyncPeriod)
	defer ticker.Stop()
	for {
		if err := r.sync(ctx); err != nil && ctx.Err() == nil {
			r.t.Logf("cluster: container runner: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync starts new Pods and stops the Pods that are gone or going.
func (r *ContainerRunner) sync(ctx context.Context) error {
	list, err := r.cluster.Clientset.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector.String()})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	live := map[types.UID]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		live[pod.UID] = true
		r.mu.Lock()
		_, known := r.pods[pod.UID]
		r.mu.Unlock()
		if !known {
			r.admit(ctx, pod.DeepCopy())
		}
	}
	r.stopAllBut(live)
	return nil
}

func (r *ContainerRunner) stopAllBut(live map[types.UID]bool) {
	r.mu.Lock()
	var gone []*runningPod
	for uid, p := range r.pods {
		if !live[uid] {
			gone = append(gone, p)
			delete(r.pods, uid)
		}
	}
	r.mu.Unlock()
	for _, p := range gone {
		p.stop()
	}
}

// admit takes a new Pod: it gives it an address and starts it on a goroutine of its own.
func (r *ContainerRunner) admit(ctx context.Context, pod *corev1.Pod) {
	port, _ := firstPort(pod)
	ctx, cancel := context.WithCancel(ctx)
	p := &runningPod{runner: r, pod: pod, ip: r.cluster.ips.allocate(port), cancel: cancel, done: make(chan struct{})}
	p.dir = filepath.Join(r.root, pod.Name)
	r.mu.Lock()
	r.pods[pod.UID] = p
	r.mu.Unlock()
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
}

// runningPod is one Pod the runner plays.
type runningPod struct {
	runner *ContainerRunner
	pod    *corev1.Pod // as first seen
	ip     string
	dir    string // the volumes' directories
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	containers []*runningContainer
	waiting    string // why the containers have not started, while they have not
}

func (p *runningPod) run(ctx context.Context) {
	t := p.runner.t
	p.setWaiting(ctx, "ContainerCreating")
	volumes, err := p.mountVolumes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("cluster: pod %s: %v", p.pod.Name, err)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { volumes.keepInSync(ctx) })
	p.mu.Lock()
	for _, spec := range p.pod.Spec.Containers {
		p.containers = append(p.containers, &runningContainer{pod: p, spec: spec})
	}
	p.waiting = ""
	p.mu.Unlock()
	for _, c := range p.containers {
		wg.Go(func() { c.supervise(ctx, volumes) })
		wg.Go(func() { c.probeReadiness(ctx) })
	}
	wg.Wait()
}

func (p *runningPod) stop() {
	p.cancel()
	<-p.done
}

func (p *runningPod) setWaiting(ctx context.Context, reason string) {
	p.mu.Lock()
	p.waiting = reason
	p.mu.Unlock()
	p.writeStatus(ctx)
}

// runningContainer is one container of a runningPod, started again whenever it exits.
type runningContainer struct {
	pod  *runningPod
	spec corev1.Container

	mu          sync.Mutex
	process     *proc.Process
	startedAt   metav1.Time
	ready       bool
	restarts    int32
	lastExit    *corev1.ContainerStateTerminated
	restartWait bool // in its backoff after an exit
}

// supervise runs the container until ctx ends, starting it again after each exit.
func (c *runningContainer) supervise(ctx context.Context, volumes *podVolumes) {
	t := c.pod.runner.t
	backoff := restartBackoff
	for ctx.Err() == nil {
		cmd, err := c.command(ctx, volumes)
		if err != nil {
			// As a kubelet's CreateContainerConfigError: tried again, since a Secret or ConfigMap
			// the environment names may yet appear.
			t.Logf("cluster: pod %s, container %s: %v", c.pod.pod.Name, c.spec.Name, err)
			sleepCtx(ctx, restartBackoff)
			continue
		}
		p := proc.Start(t, c.pod.pod.Name+"-"+c.spec.Name, cmd)
		c.mu.Lock()
		c.process, c.startedAt, c.ready, c.restartWait = p, metav1.Now(), false, false
		c.mu.Unlock()
		c.pod.writeStatus(ctx)
		select {
		case <-ctx.Done():
			p.Stop()
			return
		case <-p.Exited():
		}
		if p.Stopped() { // by the test's end
			return
		}
		c.recordExit(ctx, p)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxRestartBackoff)
	}
}

// recordExit notes an exit in the Pod's status and fails the test with the container's output.
func (c *runningContainer) recordExit(ctx context.Context, p *proc.Process) {
	code := int32(-1)
	if state := p.State(); state != nil {
		code = int32(state.ExitCode())
	}
	out := p.Log()
	tail := out[max(0, len(out)-stderrTail):]
	c.mu.Lock()
	c.restarts++
	c.ready, c.restartWait = false, true
	c.lastExit = &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: c.startedAt, FinishedAt: metav1.Now(),
		Message: lastLine(tail)}
	restarts := c.restarts
	c.mu.Unlock()
	c.pod.runner.t.Errorf("cluster: pod %s, container %s exited with %d (restart %d, restartPolicy Always); the end of its output:\n%s",
		c.pod.pod.Name, c.spec.Name, code, restarts, tail)
	c.pod.writeStatus(ctx)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// command is the container's process: podinit in new mount and UTS namespaces, which binds the
// volumes and executes the image's program.
func (c *runningContainer) command(ctx context.Context, volumes *podVolumes) (*exec.Cmd, error) {
	image, ok := c.pod.runner.images[imageRepository(c.spec.Image)]
	if !ok {
		return nil, fmt.Errorf("no program plays the image %s", c.spec.Image)
	}
	env, err := c.pod.environment(ctx, c.spec)
	if err != nil {
		return nil, err
	}
	program := append([]string{image.Binary}, c.pod.arguments(c.spec, env, image)...)
	args := []string{"-hostname", c.pod.pod.Name}
	if sc := c.spec.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		args = append(args, "-read-only-root")
	}
	for _, m := range c.spec.VolumeMounts {
		dir, ok := volumes.dirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name", m.Name)
		}
		spec := filepath.Join(dir, m.SubPath) + ":" + m.MountPath
		if m.ReadOnly {
			spec += ":ro"
		}
		args = append(args, "-mount", spec)
	}
	cmd := exec.Command(c.pod.runner.podinit, append(append(args, "--"), program...)...)
	cmd.Env = envList(env)
	cmd.Dir = "/"
	if c.spec.WorkingDir != "" {
		cmd.Dir = c.spec.WorkingDir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
	return cmd, nil
}

// imageRepository is an image's name without its tag or digest.
func imageRepository(image string) string {
	if at := strings.Index(image, "@"); at >= 0 {
		image = image[:at]
	}
	if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
		image = image[:colon]
	}
	return image
}

// writeStatus reports the Pod's state as a kubelet does: Running at its address once its
// containers run, each container's state, readiness and restarts, and the Pod's conditions.
func (p *runningPod) writeStatus(ctx context.Context) {
	pods := p.runner.cluster.Clientset.CoreV1().Pods(p.pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, p.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.UID != p.pod.UID {
			return nil
		}
		current.Status = p.status(current.Status)
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		p.runner.t.Logf("cluster: pod %s: write status: %v", p.pod.Name, err)
	}
}

// status computes the Pod's status from its containers, keeping the transition times of
// conditions that did not change.
func (p *runningPod) status(old corev1.PodStatus) corev1.PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := metav1.Now()
	s := corev1.PodStatus{Phase: corev1.PodPending, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}}, StartTime: old.StartTime, QOSClass: old.QOSClass}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	allReady := p.waiting == "" && len(p.containers) > 0
	for _, c := range p.containers {
		cs := c.status()
		allReady = allReady && cs.Ready
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}
	if p.waiting != "" {
		for _, spec := range p.pod.Spec.Containers {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: spec.Name, Image: spec.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: p.waiting}}})
		}
	} else {
		s.Phase = corev1.PodRunning
	}
	ready := corev1.ConditionFalse
	if allReady {
		ready = corev1.ConditionTrue
	}
	for _, c := range []struct {
		kind   corev1.PodConditionType
		status corev1.ConditionStatus
	}{{corev1.PodScheduled, corev1.ConditionTrue}, {corev1.PodInitialized, corev1.ConditionTrue}, {corev1.ContainersReady, ready}, {corev1.PodReady, ready}} {
		s.Conditions = append(s.Conditions, condition(old, c.kind, c.status, now))
	}
	return s
}

func condition(old corev1.PodStatus, kind corev1.PodConditionType, status corev1.ConditionStatus, now metav1.Time) corev1.PodCondition {
	for _, c := range old.Conditions {
		if c.Type == kind && c.Status == status {
			return c
		}
	}
	return corev1.PodCondition{Type: kind, Status: status, LastTransitionTime: now}
}

func (c *runningContainer) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := !c.restartWait && c.process != nil
	s := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, Ready: c.ready, RestartCount: c.restarts, Started: &started}
	switch {
	case c.restartWait:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: c.lastExit.Message}
	case c.process != nil:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: c.startedAt}
	default:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	if c.lastExit != nil {
		s.LastTerminationState.Terminated = c.lastExit
	}
	return s
}

// Restarts returns how many times the containers of the runner's Pods have exited.
func (r *ContainerRunner) Restarts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pods {
		p.mu.Lock()
		for _, c := range p.containers {
			c.mu.Lock()
			n += int(c.restarts)
			c.mu.Unlock()
		}
		p.mu.Unlock()
	}
	return n
}
