package cluster

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Shared is a kube-apiserver with CRDs installed that the tests of one package share, each
// working in a namespace of its own. The first test that needs it starts it, so that the go
// command sees the CRD files it reads and tests again when they change; TestMain calls Stop.
// A Shared is safe for concurrent use.
type Shared struct {
	// CRDs is the directory of the CRDs to install, relative to the test's package.
	CRDs string

	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// Config returns the shared API server's admin configuration, starting the server on first use.
// Under -short it skips the test.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster: needs a real kube-apiserver; skipped with -short")
	}
	s.once.Do(s.start)
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.cfg
}

func (s *Shared) start() {
	dir, err := AssetsDir()
	if err != nil {
		s.err = err
		return
	}
	s.env = &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: startTimeout, CRDDirectoryPaths: []string{s.CRDs}, ErrorIfCRDPathMissing: true}
	if s.cfg, err = s.env.Start(); err != nil {
		s.err = fmt.Errorf("cluster: start kube-apiserver from %s with the CRDs of %s: %w", dir, s.CRDs, err)
	}
}

// Stop stops the API server if a test started it.
func (s *Shared) Stop() error {
	if s.env == nil {
		return nil
	}
	return s.env.Stop()
}
