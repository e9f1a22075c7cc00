// Package redisstore connects the gateway to the Redis of its configuration, in each of its
// forms (one server, a primary found through Sentinel, a Cluster), and watches what the gateway
// needs of that Redis besides its limits and jobs: that it keeps them across a restart
// (Durability), and how many gateways share them (Peers).
package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// NewClient returns a client of the Redis that cfg locates, reading its password files and its
// certificate authorities, with the timeouts and retries of ratelimit.ClientOptions.
func NewClient(cfg *gatewayv1.RedisStore) (redis.UniversalClient, error) {
	var secrets credentials
	var err error
	if secrets.password, err = policy.ReadSecret(cfg.PasswordFile); err != nil {
		return nil, fmt.Errorf("redisstore: redis password: %w", err)
	}
	if cfg.Sentinel != nil {
		if secrets.sentinelPassword, err = policy.ReadSecret(cfg.Sentinel.PasswordFile); err != nil {
			return nil, fmt.Errorf("redisstore: sentinel password: %w", err)
		}
	}
	if secrets.tls, err = tlsConfig(cfg.TLS); err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(ratelimit.ClientOptions(universalOptions(cfg, secrets))), nil
}

// credentials are what NewClient reads from files: the passwords and the TLS configuration.
type credentials struct {
	password, sentinelPassword string
	tls                        *tls.Config
}

// universalOptions are the options of a client of cfg's Redis. redis.NewUniversalClient makes
// a Sentinel client of options with a MasterName, a Cluster client of options in cluster mode,
// and a client of one server of the others.
func universalOptions(cfg *gatewayv1.RedisStore, c credentials) redis.UniversalOptions {
	o := redis.UniversalOptions{Username: cfg.Username, Password: c.password, DB: int(cfg.DB), TLSConfig: c.tls}
	switch {
	case cfg.Sentinel != nil:
		o.Addrs, o.MasterName = cfg.Sentinel.Addresses, cfg.Sentinel.MasterName
		o.SentinelUsername, o.SentinelPassword = cfg.Sentinel.Username, c.sentinelPassword
	case cfg.Cluster != nil:
		o.Addrs, o.IsClusterMode = cfg.Cluster.Addresses, true
	default:
		o.Addrs = []string{cfg.Address}
	}
	return o
}

// tlsConfig is the TLS configuration of cfg: nil without tls; else one that verifies each
// server's certificate against the authorities of caFile, or the system's, and for the name
// serverName, or else the host the client dialled (as crypto/tls does when ServerName is empty).
func tlsConfig(cfg *gatewayv1.RedisTLS) (*tls.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redisstore: tls: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisstore: tls: %s holds no PEM certificate", cfg.CAFile)
		}
	}
	return c, nil
}
