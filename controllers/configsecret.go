package controllers

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

const (
	// ConfigHashAnnotation on the configuration Secret is the SHA-256 of its
	// data. A gateway Pod template that copies it rolls out when the
	// configuration changes.
	ConfigHashAnnotation = "sluice.dev/config-hash"
	// managedByLabel marks the configuration Secret as the operator's.
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "sluice-manager"
)

// configSecret returns the configuration Secret for a compile: config.yaml
// and the providers' key files, a hash of them, and an owner reference to
// every ProviderQuota and TenantPlan of the namespace, so that the Secret
// goes when the last of them does.
func configSecret(key types.NamespacedName, in *Inputs, out *Output) (*corev1.Secret, error) {
	cfg, err := yaml.Marshal(out.Config)
	if err != nil {
		return nil, fmt.Errorf("controllers: encode configuration: %w", err)
	}
	header := fmt.Sprintf("# Compiled by %s from the ProviderQuotas and TenantPlans of namespace %s.\n# Edits are overwritten.\n", managedBy, key.Namespace)
	data := map[string][]byte{ConfigFile: append([]byte(header), cfg...)}
	maps.Copy(data, out.KeyFiles)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels:          map[string]string{managedByLabel: managedBy},
			Annotations:     map[string]string{ConfigHashAnnotation: dataHash(data)},
			OwnerReferences: ownerReferences(in),
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, nil
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

// tooLarge returns out with every object that would have been in the
// configuration marked ConfigTooLarge, for a Secret of size bytes that the
// API server would refuse. Objects left out for a reason of their own keep
// it.
func tooLarge(out *Output, size int) *Output {
	res := Result{Reason: v1alpha1.ReasonConfigTooLarge, Message: fmt.Sprintf(
		"The gateway configuration is %d bytes, past the %d a Secret holds; it was not written and the gateways keep the one they have. Spread the tenants over more namespaces, or remove tenants or keys.",
		size, corev1.MaxSecretSize)}
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
