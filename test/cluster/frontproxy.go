package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// frontProxyClient is the name the aggregator's client certificate carries,
// and the only one extension API servers accept request headers from.
const frontProxyClient = "front-proxy-client"

// configureFrontProxy makes kube-apiserver's aggregator able to proxy to an
// extension API server, such as a metrics adapter: it generates a throwaway
// front-proxy CA and a client certificate it signs, and sets the
// requestheader and proxy-client flags. kube-apiserver then publishes the
// CA in kube-system/extension-apiserver-authentication, where the extension
// server reads it to trust the user the aggregator names in its headers.
func configureFrontProxy(env *envtest.Environment, dir string) error {
	ca, caKey, err := newCertificate(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "sluice-test-front-proxy-ca"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}, nil, nil)
	if err != nil {
		return err
	}
	client, clientKey, err := newCertificate(&x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClient},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{"front-proxy-ca.crt": ca.Raw, "front-proxy-client.crt": client.Raw}
	for name, der := range files {
		if err := writePEM(filepath.Join(dir, name), "CERTIFICATE", der); err != nil {
			return err
		}
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return fmt.Errorf("cluster: front proxy: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "front-proxy-client.key"), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("requestheader-client-ca-file", filepath.Join(dir, "front-proxy-ca.crt"))
	args.Set("requestheader-allowed-names", frontProxyClient)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", filepath.Join(dir, "front-proxy-client.crt"))
	args.Set("proxy-client-key-file", filepath.Join(dir, "front-proxy-client.key"))
	return nil
}

// newCertificate signs template with parent's key, or itself when parent is
// nil, for a day.
func newCertificate(template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: front proxy: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: front proxy: %w", err)
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: front proxy: sign %s: %w", template.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: front proxy: %w", err)
	}
	return cert, key, nil
}

func writePEM(path, blockType string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("cluster: front proxy: %w", err)
	}
	return nil
}
