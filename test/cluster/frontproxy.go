package cluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluicehq/sluice/test/testcert"
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
	ca, caKey, err := testcert.New(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "sluice-test-front-proxy-ca"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}, nil, nil)
	if err != nil {
		return fmt.Errorf("cluster: front proxy: %w", err)
	}
	client, clientKey, err := testcert.New(&x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClient},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	if err != nil {
		return fmt.Errorf("cluster: front proxy: %w", err)
	}
	for _, err := range []error{
		testcert.WriteCert(filepath.Join(dir, "front-proxy-ca.crt"), ca),
		testcert.WriteCert(filepath.Join(dir, "front-proxy-client.crt"), client),
		testcert.WriteKey(filepath.Join(dir, "front-proxy-client.key"), clientKey),
	} {
		if err != nil {
			return fmt.Errorf("cluster: front proxy: %w", err)
		}
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
