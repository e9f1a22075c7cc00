package controllers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// RecordShards is how many ConfigMaps hold the durable record of the
// calendar windows (see gatewayv1.Record) beside the configuration Secret:
// always this many, each a record file of the scopes whose names hash to
// it. The count is fixed so that a gateway Deployment mounts each by name
// and the manager's Role names each one it may update.
//
// A scope must fit in one ConfigMap of 1 MiB. A window takes the bytes of
// its key and its count in JSON, about 50 for a user's
// "user:<20 characters>:requests:day": a tenant can have about 20,000
// users with one daily quota used at once, or 10,000 with a daily and a
// monthly one, less what the other scopes of its ConfigMap take. A shard
// that would be larger keeps its last record (see RecordConfigMaps).
const RecordShards = 8

// maxConfigMapSize is the most bytes of items the API server takes in a
// ConfigMap: as many as in a Secret.
const maxConfigMapSize = corev1.MaxSecretSize

// RecordConfigMapName returns the name of the nth record ConfigMap of the
// configuration Secret named config.
func RecordConfigMapName(config string, n int) string {
	return fmt.Sprintf("%s-record-%d", config, n)
}

// RecordConfigMapNames returns the names of every record ConfigMap of the
// configuration Secret named config. A gateway mounts them, each optional,
// in the directory of its configuration's Secrets, where config.yaml names
// their record files.
func RecordConfigMapNames(config string) []string {
	names := make([]string, RecordShards)
	for n := range RecordShards {
		names[n] = RecordConfigMapName(config, n)
	}
	return names
}

// RecordFile returns the item of the nth record ConfigMap: the record file
// config.yaml names in recordFiles.
func RecordFile(n int) string {
	return fmt.Sprintf("record-%d.json", n)
}

// recordFiles are the record files of every record ConfigMap, in order.
func recordFiles() []string {
	files := make([]string, RecordShards)
	for n := range RecordShards {
		files[n] = RecordFile(n)
	}
	return files
}

// recordShard is the record ConfigMap that holds a scope.
func recordShard(scope string) int { return shardOf(scope, RecordShards) }

// shardRecord spreads the scopes over RecordShards records by recordShard,
// each sorted by scope; a shard without a scope is an empty record.
func shardRecord(scopes []gatewayv1.ScopeRecord) []gatewayv1.Record {
	shards := make([]gatewayv1.Record, RecordShards)
	for n := range shards {
		shards[n] = gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind}
	}
	for _, s := range scopes {
		n := recordShard(s.Scope)
		shards[n].Scopes = append(shards[n].Scopes, s)
	}
	for n := range shards {
		sortScopes(shards[n].Scopes)
	}
	return shards
}

// sortScopes sorts scopes by name.
func sortScopes(scopes []gatewayv1.ScopeRecord) {
	slices.SortFunc(scopes, func(a, b gatewayv1.ScopeRecord) int { return cmp.Compare(a.Scope, b.Scope) })
}

// recordConfigMaps returns the ConfigMaps that hold the shards of a record
// (see shardRecord), each a record file in JSON, labelled as the manager's
// and owned by owners.
func recordConfigMaps(config types.NamespacedName, owners []metav1.OwnerReference, shards []gatewayv1.Record) ([]*corev1.ConfigMap, error) {
	out := make([]*corev1.ConfigMap, len(shards))
	for n, shard := range shards {
		data, err := json.Marshal(&shard)
		if err != nil {
			return nil, fmt.Errorf("controllers: encode record file: %w", err)
		}
		out[n] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: RecordConfigMapName(config.Name, n), Namespace: config.Namespace,
				Labels:          map[string]string{managedByLabel: managedBy},
				OwnerReferences: owners,
			},
			Data: map[string]string{RecordFile(n): string(data)},
		}
	}
	return out, nil
}

// decodeRecordConfigMap returns the scopes of the nth record ConfigMap,
// checked as a gateway checks a record file.
func decodeRecordConfigMap(cm *corev1.ConfigMap, n int) ([]gatewayv1.ScopeRecord, error) {
	data, ok := cm.Data[RecordFile(n)]
	if !ok {
		return nil, fmt.Errorf("controllers: ConfigMap %s holds no %s", cm.Name, RecordFile(n))
	}
	var rec gatewayv1.Record
	if err := json.Unmarshal([]byte(data), &rec); err != nil {
		return nil, fmt.Errorf("controllers: decode %s of ConfigMap %s: %w", RecordFile(n), cm.Name, err)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("controllers: %s of ConfigMap %s: %w", RecordFile(n), cm.Name, err)
	}
	return rec.Scopes, nil
}

// configMapDataSize is what the API server counts against
// maxConfigMapSize: the bytes of every item's name and value.
func configMapDataSize(cm *corev1.ConfigMap) int {
	n := 0
	for name, v := range cm.Data {
		n += len(name) + len(v)
	}
	for name, v := range cm.BinaryData {
		n += len(name) + len(v)
	}
	return n
}
