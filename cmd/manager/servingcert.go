package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// The files of a serving certificate, as cert-controller and cert-manager write them into its
// Secret.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
)

// The manager issues the release's serving certificate (the metrics adapter's and its own
// metrics') from a CA it keeps in the same Secret, renews both before they expire, and writes the
// CA into the APIServices' caBundle, so that the aggregator verifies the adapter with no
// cert-manager installed. The Secret must exist (empty): cert-controller fills it. Its RBAC is
// written beside the manager's Deployment (config/manager/serving-cert.yaml, and the chart's
// templates/serving-cert.yaml), since the APIServices are cluster-scoped and the Secret is in the
// manager's own namespace, not always the one it watches.

// addCertRotator has the elected manager issue and renew the serving certificate, if the flags
// ask it to.
func addCertRotator(mgr ctrl.Manager, o *options) error {
	if !o.issueServingCert {
		return nil
	}
	if o.servingCertSecret == "" || len(o.servingCertDNSNames) == 0 || o.metricsCertDir == "" {
		return errors.New("--issue-serving-cert: must come with --serving-cert-secret, --serving-cert-dns-names and --metrics-cert-dir, the directory the Secret is mounted at")
	}
	webhooks := make([]rotator.WebhookInfo, 0, len(o.caInjectAPIServices))
	for _, apiService := range o.caInjectAPIServices {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: apiService, Type: rotator.APIService})
	}
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:             types.NamespacedName{Namespace: o.servingCertNamespace, Name: o.servingCertSecret},
		CertDir:               o.metricsCertDir,
		CAName:                "sluice-ca",
		CAOrganization:        "sluice",
		DNSName:               o.servingCertDNSNames[0],
		ExtraDNSNames:         o.servingCertDNSNames[1:],
		IsReady:               make(chan struct{}),
		Webhooks:              webhooks,
		RequireLeaderElection: true,
		FieldOwner:            name,
	})
}

// metricsTLS serves the manager's metrics with the certificate in dir, if one is named: controller-
// runtime would otherwise fall back to a self-signed certificate that no scraper can verify.
func metricsTLS(ctx context.Context, dir string) []func(*tls.Config) {
	if dir == "" {
		return nil
	}
	cert := &servingCertificate{ctx: ctx, certPath: filepath.Join(dir, certFile), keyPath: filepath.Join(dir, keyFile)}
	return []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = cert.GetCertificate }}
}

// servingCertificate serves the certificate files once they exist, and each renewal after. The
// manager issues them itself into a Secret it mounts, so they appear a while after it starts (at
// the kubelet's next sync of the volume); until then a handshake fails, naming the files.
type servingCertificate struct {
	ctx               context.Context
	certPath, keyPath string

	mu      sync.Mutex
	watcher *certwatcher.CertWatcher
}

// GetCertificate is tls.Config's.
func (s *servingCertificate) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w, err := s.load()
	if err != nil {
		return nil, err
	}
	return w.GetCertificate(hello)
}

func (s *servingCertificate) load() (*certwatcher.CertWatcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watcher != nil {
		return s.watcher, nil
	}
	w, err := certwatcher.New(s.certPath, s.keyPath)
	if err != nil {
		return nil, fmt.Errorf("serving certificate not issued yet: %w", err)
	}
	go func() {
		if err := w.Start(s.ctx); err != nil {
			ctrl.Log.Error(err, "Watching the serving certificate stopped", "file", s.certPath)
		}
	}()
	s.watcher = w
	return w, nil
}
