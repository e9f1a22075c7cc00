// Package cluster starts a real, local Kubernetes control plane for a test: etcd and
// kube-apiserver (through controller-runtime's envtest, with RBAC, service-account keys and an
// admin user authenticated by client certificate), optionally kube-controller-manager and the
// aggregator's front-proxy credentials, and a fake kubelet that runs a process for each Pod on its
// own loopback address.
//
// The binaries come from hack/build-control-plane.sh, found through KUBEBUILDER_ASSETS or, when
// that is unset, in the repository's bin/k8s/<version>/.
package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluicehq/sluice/test/proc"
)

// hpaSyncPeriod is how often the controller-manager re-evaluates each HorizontalPodAutoscaler;
// the default of 15 s would make autoscaling tests slow.
const hpaSyncPeriod = "2s"

// controllers are the kube-controller-manager controllers a Sluice test needs; the root CA
// publisher writes each namespace's kube-root-ca.crt, which a Pod's service-account volume holds.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"horizontal-pod-autoscaler-controller",
	"garbage-collector-controller",
}

// Options says which parts to start besides etcd and kube-apiserver.
type Options struct {
	// ControllerManager starts kube-controller-manager with the deployment, replicaset,
	// serviceaccount, root-ca-certificate-publisher, garbage-collector and
	// horizontal-pod-autoscaler controllers. False starts none:
	// nothing then acts on Deployments or HorizontalPodAutoscalers.
	ControllerManager bool
	// Aggregator gives kube-apiserver a front-proxy CA and client certificate
	// (the requestheader and proxy-client flags), so that an APIService can
	// route to an extension API server, such as the metrics adapter, that
	// delegates authentication to it. False leaves the aggregator without
	// them: it cannot prove to an extension server who is asking.
	Aggregator bool
	// ServiceNetwork plays kube-proxy and the EndpointSlice controller for Pods on loopback
	// addresses (see serviceNetwork): the aggregator reaches an APIService's ClusterIP Service,
	// and ServiceTransport reaches any Service. False leaves Services unreachable, as
	// EndpointSlices refuse loopback addresses.
	ServiceNetwork bool
}

// Cluster is a running local control plane owned by one test.
type Cluster struct {
	// Config is an admin's (system:masters) REST configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file that kubectl and client-go both read.
	Kubeconfig string
	// Clientset is an admin client.
	Clientset kubernetes.Interface

	assets  string
	ips     ipAllocator
	network *serviceNetwork
}

// startTimeout bounds the start of etcd and kube-apiserver, well past envtest's 20 s default: on
// a small machine busy with other tests the API server can take longer than that to be ready.
const startTimeout = 2 * time.Minute

// Start starts the control plane and stops it when the test ends. Under -short the test is
// skipped, because the fast loop needs no control plane.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster: needs the local control plane; skipped with -short")
	}
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	// envtest logs through controller-runtime, which prints a stack trace when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStartTimeout: startTimeout}
	if opts.ControllerManager {
		// envtest turns off the ServiceAccount admission plugin because nothing would create the
		// default ServiceAccount; here the serviceaccount controller does.
		env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
	}
	if opts.Aggregator {
		if err := configureFrontProxy(env, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{}
	if opts.ServiceNetwork {
		if c.network, err = configureServiceNetwork(env, c, shortTempDir(t)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cluster: start etcd and kube-apiserver from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("cluster: stop: %v", err)
		}
	})
	c.Config, c.assets = cfg, assets
	c.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatalf("cluster: write kubeconfig: %v", err)
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatalf("cluster: client: %v", err)
	}
	if c.network != nil {
		c.network.start(t)
	}
	if opts.ControllerManager {
		c.startControllerManager(t)
	}
	return c
}

func (c *Cluster) startControllerManager(t testing.TB) {
	cmd := exec.Command(filepath.Join(c.assets, "kube-controller-manager"),
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers="+strings.Join(controllers, ","),
		"--horizontal-pod-autoscaler-sync-period="+hpaSyncPeriod,
		"--horizontal-pod-autoscaler-downscale-stabilization=10s",
	)
	p := proc.Start(t, "kube-controller-manager", cmd)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("cluster: kube-controller-manager: %v", err)
		}
	})
}

// Kubectl runs kubectl from the control plane's build as the admin user and returns its output.
func (c *Cluster) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.assets, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// AssetsDir returns the directory holding etcd, kube-apiserver, kube-controller-manager and
// kubectl: KUBEBUILDER_ASSETS if set, else the newest bin/k8s/<version>/ of the repository.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "*", "kube-apiserver"))
	if len(found) == 0 {
		return "", errors.New("cluster: no control plane in bin/k8s: run `make test`, or hack/build-control-plane.sh")
	}
	sort.Strings(found)
	return filepath.Dir(found[len(found)-1]), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cluster: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// ipAllocator hands out loopback addresses 127.N.0.2, 127.N.0.3, ... one per Pod, with N drawn at
// random for each cluster, so that clusters of tests running at once (each package's tests are a
// process of their own) do not share addresses. Linux routes all of 127.0.0.0/8 to the loopback
// interface, so each address can be bound without setup.
type ipAllocator struct {
	mu   sync.Mutex
	base int // N, from 1 to 254; 0 until the first address
	next int
}

// allocate returns the next address on which port (when not 0) is free now.
func (a *ipAllocator) allocate(port int32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.base == 0 {
		a.base = 1 + rand.IntN(254)
	}
	for {
		i := a.next
		a.next++
		// Hosts .2 to .254 of each /24: .1 is left to the host, .0 and .255 are avoided.
		ip := fmt.Sprintf("127.%d.%d.%d", a.base, i/253%256, i%253+2)
		if port == 0 || portFree(ip, port) {
			return ip
		}
	}
}

func portFree(ip string, port int32) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// shortTempDir is a temporary directory removed when the test ends, with a path short enough
// for a Unix socket's (108 bytes), which t.TempDir's, named after the test, may not be.
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "sluice")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
