package v1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads the configuration file at path and parses it (see Parse), with
// the tenants of its tenantFiles, each checked against its sha256 when the
// configuration gives one. It resolves a relative path of a tenant file,
// apiKeyFile, passwordFile (Redis's or the sentinels') or caFile against the
// file's directory, but reads only the tenant files: the gateway reads the
// others when it applies the configuration.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: read config: %w", err)
	}
	c, err := load(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: %s: %w", path, err)
	}
	return c, nil
}

// load is Load of a file's data, read from dir, with errors that do not yet
// name the file.
func load(data []byte, dir string) (*Config, error) {
	c, err := decodeConfig(data)
	if err != nil {
		return nil, err
	}
	c.resolvePaths(dir)
	if err := c.readTenantFiles(); err != nil {
		return nil, err
	}
	if err := c.readRecordFiles(); err != nil {
		return nil, err
	}
	if err := c.complete(); err != nil {
		return nil, err
	}
	return c, nil
}

// readTenantFiles appends the tenants of every tenant file to c's.
func (c *Config) readTenantFiles() error {
	for i, f := range c.TenantFiles {
		tenants, err := readTenantFile(f)
		if err != nil {
			return fmt.Errorf("tenantFiles[%d]: %w", i, err)
		}
		c.Tenants = append(c.Tenants, tenants...)
	}
	return nil
}

// readRecordFiles appends the scopes of every record file to c's record. A
// file that does not exist holds none: the operator writes the record only
// once it has polled the gateways.
func (c *Config) readRecordFiles() error {
	for i, path := range c.RecordFiles {
		rec, err := readRecordFile(path)
		if err != nil {
			return fmt.Errorf("recordFiles[%d]: %w", i, err)
		}
		c.Record = append(c.Record, rec.Scopes...)
	}
	return nil
}

// readRecordFile reads, checks and decodes one record file.
func readRecordFile(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read record file: %w", err)
	}
	var rec Record
	if len(bytes.TrimSpace(data)) == 0 {
		return &rec, nil // an optional ConfigMap's item not written yet
	}
	j, err := toJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: parse record file as YAML: %w", path, err)
	}
	if err := decodeStrict(j, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rec, nil
}

// readTenantFile reads, checks and decodes one tenant file.
func readTenantFile(f TenantFile) ([]Tenant, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("read tenant file: %w", err)
	}
	if sum := sha256.Sum256(data); f.SHA256 != "" && hex.EncodeToString(sum[:]) != f.SHA256 {
		return nil, fmt.Errorf("%s does not match the sha256 the configuration names: it is being replaced, or was edited apart from the configuration", f.Path)
	}
	j, err := toJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: parse tenant file as YAML: %w", f.Path, err)
	}
	if err := checkTypeMeta(j, TenantListKind); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var list TenantList
	if err := decodeStrict(j, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return list.Tenants, nil
}

// resolvePaths makes the secret files' relative paths relative to dir.
func (c *Config) resolvePaths(dir string) {
	for i := range c.Providers {
		c.Providers[i].APIKeyFile = resolve(dir, c.Providers[i].APIKeyFile)
	}
	for i := range c.TenantFiles {
		c.TenantFiles[i].Path = resolve(dir, c.TenantFiles[i].Path)
	}
	for i := range c.RecordFiles {
		c.RecordFiles[i] = resolve(dir, c.RecordFiles[i])
	}
	if r := c.Store.Redis; r != nil {
		r.PasswordFile = resolve(dir, r.PasswordFile)
		if r.TLS != nil {
			r.TLS.CAFile = resolve(dir, r.TLS.CAFile)
		}
		if r.Sentinel != nil {
			r.Sentinel.PasswordFile = resolve(dir, r.Sentinel.PasswordFile)
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

// Parse decodes a configuration from YAML or JSON, applies the defaults,
// validates it and gives each tenant that names a plan the plan's terms. It
// does not read tenantFiles: Load does. Decoding is strict and
// case-sensitive, as Kubernetes decodes objects: a key the format does not
// know, misspelt or given twice, is an error that names it with its path,
// such as unknown field "providers[0].requestsPerMin".
func Parse(data []byte) (*Config, error) {
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gatewayv1: %w", err)
	}
	return c, nil
}

// parse is Parse with errors that do not yet name the package.
func parse(data []byte) (*Config, error) {
	c, err := decodeConfig(data)
	if err != nil {
		return nil, err
	}
	if err := c.complete(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeConfig decodes a configuration strictly, without defaults.
func decodeConfig(data []byte) (*Config, error) {
	j, err := toJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse config as YAML: %w", err)
	}
	if err := checkTypeMeta(j, Kind); err != nil {
		return nil, err
	}
	c := &Config{}
	if err := decodeStrict(j, c); err != nil {
		return nil, err
	}
	return c, nil
}

// complete defaults and validates a decoded configuration, and then copies
// each plan's terms into the tenants that name it.
func (c *Config) complete() error {
	c.Default()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	c.expandPlans()
	return nil
}

// expandPlans gives each tenant that names a plan a copy of the plan's
// terms, and clears its plan, so that every tenant reads alike and the
// Config still validates. The copies share the plan's slices and pointers:
// a Config is read-only once loaded.
func (c *Config) expandPlans() {
	plans := make(map[string]*Tenant, len(c.Plans))
	for i := range c.Plans {
		plans[c.Plans[i].Name] = &c.Plans[i]
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if pl, ok := plans[t.Plan]; ok {
			terms := *pl
			terms.Name, terms.UID, terms.Keys, terms.Plan = t.Name, t.UID, t.Keys, ""
			*t = terms
		}
	}
}

// toJSON returns a document as JSON. JSON is YAML, but a YAML parser takes
// several times as long over it as a JSON one: a JSON object, such as the
// tenant files the operator writes, is returned as it is, its keys checked
// by the strict decoder, and anything else converted from YAML.
func toJSON(data []byte) ([]byte, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		return trimmed, nil
	}
	return yaml.YAMLToJSONStrict(data)
}

// typeMeta is what every version of the file holds.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// checkTypeMeta refuses a document that is not this version's kind before
// its fields are judged, so a file of another version or kind gets one clear
// error.
func checkTypeMeta(j []byte, kind string) error {
	switch j = bytes.TrimSpace(j); {
	case bytes.Equal(j, []byte("null")):
		return errors.New("config is empty")
	case !bytes.HasPrefix(j, []byte("{")):
		return errors.New("config must be a mapping of apiVersion, kind and the other fields")
	}
	var tm typeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		if fe := badField(j, reflect.TypeFor[typeMeta](), nil); fe != nil {
			return fmt.Errorf("parse config: %w", fe)
		}
		return fmt.Errorf("parse config: %w", err)
	}
	if errs := validateTypeMeta(tm.APIVersion, tm.Kind, kind); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// decodeStrict decodes JSON into v, case-sensitively, refusing unknown and
// repeated keys. A value the decoder refuses is reported at its field's path.
func decodeStrict[T any](j []byte, v *T) error {
	strict, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		if fe := badField(j, reflect.TypeFor[T](), nil); fe != nil {
			return fmt.Errorf("decode config: %w", fe)
		}
		return fmt.Errorf("decode config: %w", err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("decode config: %w", utilerrors.NewAggregate(strict))
	}
	return nil
}

// badField finds the value in j that does not decode into t, the type of the
// field at path p (nil: the whole config), by decoding j again a field at a
// time, and returns its error, or nil if every value decodes. The decoder
// alone names a field of the wrong type without its index, and a value its
// type refuses itself, such as a duration, not at all.
func badField(j []byte, t reflect.Type, p *field.Path) *field.Error {
	switch {
	case reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()):
		return decodeLeaf(j, t, p)
	case t.Kind() == reflect.Pointer:
		return badField(j, t.Elem(), p)
	case t.Kind() == reflect.Struct:
		return badStructField(j, t, p)
	case t.Kind() == reflect.Slice:
		var items []json.RawMessage
		if kjson.UnmarshalCaseSensitivePreserveInts(j, &items) != nil {
			return field.Invalid(p, field.OmitValueType{}, "must be a list")
		}
		for i, item := range items {
			if fe := badField(item, t.Elem(), p.Index(i)); fe != nil {
				return fe
			}
		}
		return nil
	}
	return decodeLeaf(j, t, p)
}

// badStructField is badField for a struct: a mapping whose keys are its
// fields' JSON names.
func badStructField(j []byte, t reflect.Type, p *field.Path) *field.Error {
	var fields map[string]json.RawMessage
	if kjson.UnmarshalCaseSensitivePreserveInts(j, &fields) != nil {
		return field.Invalid(p, field.OmitValueType{}, "must be a mapping")
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		raw, ok := fields[name]
		if !ok || name == "" || name == "-" {
			continue
		}
		fp := field.NewPath(name)
		if p != nil {
			fp = p.Child(name)
		}
		if fe := badField(raw, t.Field(i).Type, fp); fe != nil {
			return fe
		}
	}
	return nil
}

// decodeLeaf decodes j into a new value of t, and says what the value must be
// if it does not decode.
func decodeLeaf(j []byte, t reflect.Type, p *field.Path) *field.Error {
	if kjson.UnmarshalCaseSensitivePreserveInts(j, reflect.New(t).Interface()) == nil {
		return nil
	}
	return field.Invalid(p, field.OmitValueType{}, "must be "+expected(t))
}

// expected says what a value of t is written as.
func expected(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Money]():
		return `a quoted string: write amounts of money as quoted strings, such as "3.00"`
	case t == reflect.TypeFor[metav1.Duration]():
		return `a duration such as "30s", "1m" or "1h30m"`
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		bits := t.Bits() - 1
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << bits), int64(1)<<bits-1)
	}
	return "a " + t.Kind().String()
}
