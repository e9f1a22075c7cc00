package controllers

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/test/cluster"
)

// apiServer is the kube-apiserver, with the CRDs installed, that every test of this package
// shares; each test works in a namespace of its own.
var apiServer = &cluster.Shared{CRDs: "../config/crd/bases"}

func TestMain(m *testing.M) {
	// The reconcilers log through controller-runtime's logger, which warns
	// with a stack trace once a test has run 30s without one set.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "controllers: stop kube-apiserver: %v\n", err)
	}
	os.Exit(code)
}

// startAPIServer returns the shared API server's configuration, starting it on first use, or
// skips the test under -short.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	return apiServer.Config(t)
}

// testScheme knows the core types and Sluice's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// notDNS matches what a namespace's name may not hold.
var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newNamespace starts the shared API server if need be and returns an
// uncached client of it and a new namespace for the test.
func newNamespace(t *testing.T) (client.Client, string) {
	t.Helper()
	cfg := startAPIServer(t)
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name[:min(len(name), 63)]}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return c, ns.Name
}

// recorder is an events.EventRecorder that keeps what it is told. It is safe
// for concurrent use.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventType, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = fmt.Sprintf("%T %s", o, o.GetName())
	}
	r.events = append(r.events, fmt.Sprintf("%s: %s %s %s: %s", name, eventType, reason, action, fmt.Sprintf(note, args...)))
}

// all returns the events so far, one a line.
func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}
