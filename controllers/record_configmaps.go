package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// The record's permissions, for make manifests: ConfigMaps of the gateways'
// namespace, where the manager reads its record and writes it. As for the
// Secrets, create covers every ConfigMap of the namespace (a create request
// carries no name); update is for the RecordShards record ConfigMaps of
// sluice-gateway-config only.
//
// +kubebuilder:rbac:groups="",namespace=sluice-system,resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",namespace=sluice-system,resources=configmaps,resourceNames=sluice-gateway-config-record-0;sluice-gateway-config-record-1;sluice-gateway-config-record-2;sluice-gateway-config-record-3;sluice-gateway-config-record-4;sluice-gateway-config-record-5;sluice-gateway-config-record-6;sluice-gateway-config-record-7,verbs=update

var _ usage.RecordStore = (*RecordConfigMaps)(nil)

// RecordConfigMaps keeps the durable record of the calendar windows in the
// RecordShards ConfigMaps of a configuration Secret, which the gateways
// mount beside it (see RecordConfigMapNames). It is the usage poller's
// RecordStore. Like the configuration's Secrets, the ConfigMaps are owned by
// every ProviderQuota and TenantPlan of the namespace, so that they go when
// the last of them does. It is safe for concurrent use.
type RecordConfigMaps struct {
	// Client reads and writes the ConfigMaps, and lists the ProviderQuotas
	// and TenantPlans that own them. In a manager, reads come from its
	// cache.
	Client client.Client
	// Recorder emits an event when a shard grows past what a ConfigMap
	// holds. Nil means no events.
	Recorder events.EventRecorder
	// Namespace is the ConfigMaps' namespace: the gateways'.
	Namespace string
	// SecretName names the configuration Secret whose record this is.
	SecretName string

	mu       sync.Mutex
	tooLarge map[string]bool // the ConfigMaps last found too large to write
}

// ReadRecord returns the record the ConfigMaps hold: their scopes, sorted.
// A ConfigMap not written yet holds none; one that does not decode is
// logged and read as empty, so that the next write replaces it.
func (k *RecordConfigMaps) ReadRecord(ctx context.Context) (*gatewayv1.Record, error) {
	rec := &gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind}
	for n, name := range RecordConfigMapNames(k.SecretName) {
		var cm corev1.ConfigMap
		err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, &cm)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("controllers: get ConfigMap %s/%s: %w", k.Namespace, name, err)
		}
		scopes, err := decodeRecordConfigMap(&cm, n)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "The durable record's ConfigMap does not decode; it is read as empty and written again", "configMap", name)
			continue
		}
		rec.Scopes = append(rec.Scopes, scopes...)
	}
	sortScopes(rec.Scopes)
	return rec, nil
}

// WriteRecord writes rec into the ConfigMaps whose record changed. A
// ConfigMap that rec would take past what the API server holds keeps its
// last record; the ProviderQuotas and TenantPlans of its scopes hear of it
// in an event. With no ProviderQuota or TenantPlan to own them, nothing is
// written.
func (k *RecordConfigMaps) WriteRecord(ctx context.Context, rec *gatewayv1.Record) error {
	var pqs v1alpha1.ProviderQuotaList
	var tps v1alpha1.TenantPlanList
	for what, list := range map[string]client.ObjectList{"ProviderQuotas": &pqs, "TenantPlans": &tps} {
		if err := k.Client.List(ctx, list, client.InNamespace(k.Namespace)); err != nil {
			return fmt.Errorf("controllers: list %s in %s: %w", what, k.Namespace, err)
		}
	}
	owners := ownerReferences(&Inputs{ProviderQuotas: pqs.Items, TenantPlans: tps.Items})
	if len(owners) == 0 {
		return nil
	}
	shards := shardRecord(rec.Scopes)
	desired, err := recordConfigMaps(types.NamespacedName{Namespace: k.Namespace, Name: k.SecretName}, owners, shards)
	if err != nil {
		return err
	}
	var errs []error
	for n, cm := range desired {
		if size := configMapDataSize(cm); size > maxConfigMapSize {
			k.shardTooLarge(ctx, cm, size, scopeObjects(shards[n].Scopes, pqs.Items, tps.Items))
			continue
		}
		k.shardFits(ctx, cm.Name)
		errs = append(errs, k.writeConfigMap(ctx, cm))
	}
	return errors.Join(errs...)
}

// writeConfigMap creates or updates one ConfigMap, desired, in one write,
// or leaves it when it already holds what desired does.
func (k *RecordConfigMaps) writeConfigMap(ctx context.Context, desired *corev1.ConfigMap) error {
	key := client.ObjectKeyFromObject(desired)
	var existing corev1.ConfigMap
	err := k.Client.Get(ctx, key, &existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := k.Client.Create(ctx, desired); err != nil {
			return fmt.Errorf("controllers: create ConfigMap %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("controllers: get ConfigMap %s: %w", key, err)
	case configMapUpToDate(&existing, desired):
		return nil
	}
	updateConfigMap(&existing, desired)
	if err := k.Client.Update(ctx, &existing); err != nil {
		return fmt.Errorf("controllers: update ConfigMap %s: %w", key, err)
	}
	return nil
}

// configMapUpToDate reports whether existing already holds what desired
// does: the same items, label and owners. Other labels and annotations are
// someone else's and do not count.
func configMapUpToDate(existing, desired *corev1.ConfigMap) bool {
	return maps.Equal(existing.Data, desired.Data) && len(existing.BinaryData) == 0 &&
		existing.Labels[managedByLabel] == managedBy &&
		equality.Semantic.DeepEqual(existing.OwnerReferences, desired.OwnerReferences)
}

// updateConfigMap writes desired's items, label and owners into existing,
// keeping everyone else's labels and annotations.
func updateConfigMap(existing, desired *corev1.ConfigMap) {
	existing.Data, existing.BinaryData = desired.Data, nil
	existing.OwnerReferences = desired.OwnerReferences
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	maps.Copy(existing.Labels, desired.Labels)
}

// shardTooLarge logs, and tells the objects of the shard's scopes in an
// event, when the ConfigMap cm of size bytes first grows past what the API
// server holds.
func (k *RecordConfigMaps) shardTooLarge(ctx context.Context, cm *corev1.ConfigMap, size int, regarding []client.Object) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tooLarge[cm.Name] {
		return
	}
	if k.tooLarge == nil {
		k.tooLarge = map[string]bool{}
	}
	k.tooLarge[cm.Name] = true
	ctrl.LoggerFrom(ctx).Info("The durable record does not fit its ConfigMap; it keeps its last record", "configMap", cm.Name, "bytes", size)
	note := fmt.Sprintf("The durable record's ConfigMap %s would be %d bytes, past the %d a ConfigMap holds; it keeps its last record, which the gateways re-seed their store from. "+
		"A tenant's windows, its users' included, must fit one ConfigMap: about 20,000 users with one daily quota. Move tenants to another namespace, or drop perUser calendar limits.",
		cm.Name, size, maxConfigMapSize)
	if k.Recorder == nil {
		return
	}
	for _, o := range regarding {
		k.Recorder.Eventf(o, nil, corev1.EventTypeWarning, "RecordTooLarge", "KeepRecord", "%s", note)
	}
}

// shardFits forgets that the ConfigMap named name was too large, and logs
// it when it was.
func (k *RecordConfigMaps) shardFits(ctx context.Context, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tooLarge[name] {
		delete(k.tooLarge, name)
		ctrl.LoggerFrom(ctx).Info("The durable record fits its ConfigMap again", "configMap", name)
	}
}

// scopeObjects returns the objects whose limits the scopes count: the
// TenantPlan of each tenant scope and the ProviderQuota of each provider's.
func scopeObjects(scopes []gatewayv1.ScopeRecord, pqs []v1alpha1.ProviderQuota, tps []v1alpha1.TenantPlan) []client.Object {
	named := map[string]bool{}
	for _, s := range scopes {
		named[s.Scope] = true
	}
	var out []client.Object
	for i := range tps {
		for _, tenant := range tps[i].Spec.Tenants {
			if named[tenantScope(tenant)] {
				out = append(out, &tps[i])
				break
			}
		}
	}
	for i := range pqs {
		if named[pqs[i].Name] {
			out = append(out, &pqs[i])
		}
	}
	return out
}

// tenantScope is the scope of a tenant's windows in the record.
func tenantScope(tenant string) string { return "tenant:" + tenant }
