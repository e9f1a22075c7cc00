package controllers

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

const (
	// ConfigHashAnnotation on each of the configuration's Secrets is the
	// SHA-256 of its data. The configuration Secret's changes whenever a
	// tenant Secret's does, since its config.yaml names their hashes: a
	// gateway Pod template that copies it rolls out when the configuration
	// changes.
	ConfigHashAnnotation = "sluice.dev/config-hash"
	// managedByLabel marks the configuration's Secrets as the operator's.
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "sluice-manager"
)

// TenantShards is how many tenant Secrets hold the configuration's tenants
// beside its configuration Secret: always this many, each a tenant file of
// the tenants whose names hash to it (see TenantSecretName, TenantFile). The
// count is fixed so that a gateway Deployment mounts each by name and the
// manager's Role names each one it may update; eight Secrets of 1 MiB hold
// about 65,000 keys.
const TenantShards = 8

// TenantSecretName returns the name of the nth tenant Secret of the
// configuration Secret named config.
func TenantSecretName(config string, n int) string {
	return fmt.Sprintf("%s%d", tenantSecretPrefix(config), n)
}

// ConfigSecretNames returns the names of every Secret of the configuration
// Secret named config: its tenant Secrets, then itself. A gateway mounts
// them all in one directory (a projected volume), where config.yaml names
// the tenant files.
func ConfigSecretNames(config string) []string {
	names := make([]string, 0, TenantShards+1)
	for n := range TenantShards {
		names = append(names, TenantSecretName(config, n))
	}
	return append(names, config)
}

// tenantSecretPrefix begins the name of every tenant Secret of the
// configuration Secret named config.
func tenantSecretPrefix(config string) string {
	return config + "-tenants-"
}

// TenantFile returns the item of the nth tenant Secret: the tenant file the
// configuration names, which a gateway finds beside config.yaml when the
// Secrets are projected into one volume.
func TenantFile(n int) string {
	return fmt.Sprintf("tenants-%d.json", n)
}

// tenantShard is the tenant Secret that holds a tenant.
func tenantShard(name string) int { return shardOf(name, TenantShards) }

// shardOf is the shard of shards that holds name: FNV-1a of the name,
// modulo shards, so that a name stays in its shard whatever other names come
// and go.
func shardOf(name string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(shards))
}

// configSecrets returns the Secrets of a compile: the TenantShards tenant
// Secrets, each a tenant file in JSON, then the configuration Secret, whose
// config.yaml names each tenant file with its SHA-256 and each record file
// (see RecordFile), and which holds the providers' key files.
// Each carries a hash of its items and an owner reference to every
// ProviderQuota and TenantPlan of the namespace, so that the Secrets go when
// the last of them does.
func configSecrets(key types.NamespacedName, in *Inputs, out *Output) ([]*corev1.Secret, error) {
	header := fmt.Sprintf("# Compiled by %s from the ProviderQuotas and TenantPlans of namespace %s.\n# Edits are overwritten.\n", managedBy, key.Namespace)
	owners := ownerReferences(in)
	secrets := make([]*corev1.Secret, 0, TenantShards+1)
	files := make([]gatewayv1.TenantFile, TenantShards)
	for n, tenants := range shardTenants(out.Config.Tenants) {
		// JSON, which a gateway reads several times as fast as YAML.
		data, err := json.Marshal(&gatewayv1.TenantList{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.TenantListKind, Tenants: tenants})
		if err != nil {
			return nil, fmt.Errorf("controllers: encode tenant file: %w", err)
		}
		sum := sha256.Sum256(data)
		files[n] = gatewayv1.TenantFile{Path: TenantFile(n), SHA256: hex.EncodeToString(sum[:])}
		name := types.NamespacedName{Namespace: key.Namespace, Name: TenantSecretName(key.Name, n)}
		secrets = append(secrets, newSecret(name, owners, map[string][]byte{TenantFile(n): data}))
	}
	cfg := *out.Config
	cfg.Tenants, cfg.TenantFiles = nil, files
	cfg.RecordFiles = recordFiles()
	data, err := encode(header, &cfg)
	if err != nil {
		return nil, err
	}
	items := map[string][]byte{ConfigFile: data}
	maps.Copy(items, out.KeyFiles)
	return append(secrets, newSecret(key, owners, items)), nil
}

// configFileSum is the lower-case hex SHA-256 of the config.yaml the
// configuration Secret holds, the last of the Secrets configSecrets
// returns: what a gateway that loaded it reports (gatewayv1.Usage).
func configFileSum(secrets []*corev1.Secret) string {
	sum := sha256.Sum256(secrets[len(secrets)-1].Data[ConfigFile])
	return hex.EncodeToString(sum[:])
}

// shardTenants spreads tenants over TenantShards lists by tenantShard,
// keeping their order.
func shardTenants(tenants []gatewayv1.Tenant) [][]gatewayv1.Tenant {
	shards := make([][]gatewayv1.Tenant, TenantShards)
	for _, t := range tenants {
		n := tenantShard(t.Name)
		shards[n] = append(shards[n], t)
	}
	return shards
}

// encode writes v as YAML after a header of comments.
func encode(header string, v any) ([]byte, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("controllers: encode configuration: %w", err)
	}
	return append([]byte(header), data...), nil
}

// newSecret returns one of the configuration's Secrets, labelled as the
// manager's, with the hash of its items.
func newSecret(key types.NamespacedName, owners []metav1.OwnerReference, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels:          map[string]string{managedByLabel: managedBy},
			Annotations:     map[string]string{ConfigHashAnnotation: dataHash(data)},
			OwnerReferences: owners,
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// ownerReferences refers to every object of in, ProviderQuotas first, each
// kind by name, so that the list does not change order between compiles.
func ownerReferences(in *Inputs) []metav1.OwnerReference {
	var refs []metav1.OwnerReference
	for _, pq := range in.ProviderQuotas {
		refs = append(refs, ownerReference("ProviderQuota", pq.ObjectMeta))
	}
	for _, tp := range in.TenantPlans {
		refs = append(refs, ownerReference("TenantPlan", tp.ObjectMeta))
	}
	slices.SortFunc(refs, func(a, b metav1.OwnerReference) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return refs
}

func ownerReference(kind string, m metav1.ObjectMeta) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Name: m.Name, UID: m.UID}
}

// dataHash is the hex SHA-256 of a Secret's items, in name order, each
// name and value length-prefixed so that no two sets of items collide.
func dataHash(data map[string][]byte) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(data[name]))
		h.Write(data[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// secretUpToDate reports whether existing already holds what desired does:
// the same items, hash, label and owners. Other labels and annotations are
// someone else's and do not count.
func secretUpToDate(existing, desired *corev1.Secret) bool {
	return maps.EqualFunc(existing.Data, desired.Data, bytes.Equal) &&
		existing.Annotations[ConfigHashAnnotation] == desired.Annotations[ConfigHashAnnotation] &&
		existing.Labels[managedByLabel] == managedBy &&
		equality.Semantic.DeepEqual(existing.OwnerReferences, desired.OwnerReferences)
}

// updateSecret writes desired's items, hash, label and owners into
// existing, keeping everyone else's labels and annotations.
func updateSecret(existing, desired *corev1.Secret) {
	existing.Data, existing.StringData = desired.Data, nil
	existing.OwnerReferences = desired.OwnerReferences
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	maps.Copy(existing.Labels, desired.Labels)
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	maps.Copy(existing.Annotations, desired.Annotations)
}

// secretDataSize is what the API server counts against
// corev1.MaxSecretSize: the bytes of every item's name and value.
func secretDataSize(s *corev1.Secret) int {
	n := 0
	for name, v := range s.Data {
		n += len(name) + len(v)
	}
	return n
}

// oversized returns the first of secrets whose items the API server would
// refuse as past corev1.MaxSecretSize, and their size, or nil.
func oversized(secrets []*corev1.Secret) (*corev1.Secret, int) {
	for _, s := range secrets {
		if size := secretDataSize(s); size > corev1.MaxSecretSize {
			return s, size
		}
	}
	return nil, 0
}

// tooLarge returns out with every object that would have been in the
// configuration marked ConfigTooLarge, for the Secret s of size bytes that
// the API server would refuse. Objects left out for a reason of their own
// keep it.
func tooLarge(out *Output, s *corev1.Secret, size int) *Output {
	res := Result{Reason: v1alpha1.ReasonConfigTooLarge, Message: fmt.Sprintf(
		"The gateway configuration's Secret %s would be %d bytes, past the %d a Secret holds; nothing was written and the gateways keep the configuration they have. "+
			"The tenants are spread over %d Secrets by a hash of their names: spread them over more namespaces, or remove tenants or keys.",
		s.Name, size, corev1.MaxSecretSize, TenantShards)}
	for name, pr := range out.ProviderQuotas {
		if pr.Ready() {
			pr.Result = res
			out.ProviderQuotas[name] = pr
		}
	}
	for name, pr := range out.TenantPlans {
		if pr.Reason == v1alpha1.ReasonCompiled || pr.TenantCount() > 0 {
			pr.Result = res
			out.TenantPlans[name] = pr
		}
	}
	return out
}
