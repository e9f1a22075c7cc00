package v1

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads the configuration file at path and parses it (see Parse). It
// resolves a relative apiKeyFile, passwordFile or caFile against the file's
// directory, but never reads those files: the gateway does, when it applies
// the configuration.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: read config: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: %s: %w", path, err)
	}
	c.resolvePaths(filepath.Dir(path))
	return c, nil
}

// resolvePaths makes the secret files' relative paths relative to dir.
func (c *Config) resolvePaths(dir string) {
	for i := range c.Providers {
		c.Providers[i].APIKeyFile = resolve(dir, c.Providers[i].APIKeyFile)
	}
	if r := c.Store.Redis; r != nil {
		r.PasswordFile = resolve(dir, r.PasswordFile)
		if r.TLS != nil {
			r.TLS.CAFile = resolve(dir, r.TLS.CAFile)
		}
	}
}

// resolve joins a relative, non-empty path to dir.
func resolve(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// Parse decodes a configuration from YAML or JSON, applies the defaults and
// validates it. Decoding is strict and case-sensitive, as Kubernetes decodes
// objects: a key the format does not know, misspelt or given twice, is an
// error that names it with its path, such as
// unknown field "providers[0].requestsPerMin".
func Parse(data []byte) (*Config, error) {
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: %w", err)
	}
	return c, nil
}

// parse is Parse with errors that do not yet name the package.
func parse(data []byte) (*Config, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if err := checkTypeMeta(j); err != nil {
		return nil, err
	}
	c := &Config{}
	if err := decodeStrict(j, c); err != nil {
		return nil, err
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	return c, nil
}

// checkTypeMeta refuses a document that is not this version's config before
// its fields are judged, so a file of another version gets one clear error.
func checkTypeMeta(j []byte) error {
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return errors.New("config is empty")
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	if errs := validateTypeMeta(tm.APIVersion, tm.Kind); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// decodeStrict decodes JSON into c, case-sensitively, refusing unknown and
// repeated keys.
func decodeStrict(j []byte, c *Config) error {
	strict, err := kjson.UnmarshalStrict(j, c)
	if err != nil {
		return fmt.Errorf("decode config: %w", moneyHint(err))
	}
	if len(strict) > 0 {
		return fmt.Errorf("decode config: %w", utilerrors.NewAggregate(strict))
	}
	return nil
}

// moneyHint explains the error YAML's unquoted decimals cause: `amount: 3.00`
// is a number, and Money is a string.
func moneyHint(err error) error {
	if !strings.Contains(err.Error(), fmt.Sprintf("%T", Money(""))) {
		return err
	}
	return fmt.Errorf("%w (write amounts of money as quoted strings, such as \"3.00\")", err)
}
