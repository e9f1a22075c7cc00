package controllers

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// The tests' calendar windows, as the record holds them: those that end at
// midnight after epoch and at the end of its month.
var (
	midnight = metav1.NewTime(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	monthEnd = metav1.NewTime(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
)

func recordScope(name string, version int64, ws ...gatewayv1.WindowsEnding) gatewayv1.ScopeRecord {
	return gatewayv1.ScopeRecord{Scope: name, Version: version, TakenAt: metav1.NewTime(epoch), Windows: ws}
}

func ending(at metav1.Time, used map[string]int64) gatewayv1.WindowsEnding {
	return gatewayv1.WindowsEnding{EndsAt: at, Used: used}
}

// TestRecordConfigMaps checks the record's ConfigMaps: one per shard, each
// scope in the shard its name hashes to, every shard there even when empty,
// and what a gateway loads from them projected beside the configuration
// Secrets is the record.
func TestRecordConfigMaps(t *testing.T) {
	scopes := []gatewayv1.ScopeRecord{
		recordScope("tenant:globex", 1, ending(midnight, map[string]int64{"user:bob:requests:day": 3})),
		recordScope("tenant:acme", 4, ending(midnight, map[string]int64{"tenant:requests:day": 90}), ending(monthEnd, map[string]int64{"tenant:budget": 12_500_000})),
		recordScope("openai", 2, ending(monthEnd, map[string]int64{"provider:microdollars:month": 1_000})),
		recordScope("sluice:global", 9),
	}
	owners := []metav1.OwnerReference{{APIVersion: "sluice.dev/v1alpha1", Kind: "TenantPlan", Name: "pro", UID: "uid-tp"}}
	cms, err := recordConfigMaps(types.NamespacedName{Namespace: testNamespace, Name: configSecretName}, owners, shardRecord(scopes))
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) != RecordShards {
		t.Fatalf("%d ConfigMaps; want %d", len(cms), RecordShards)
	}
	found := map[string]int{}
	for n, cm := range cms {
		if cm.Name != RecordConfigMapName(configSecretName, n) || cm.Namespace != testNamespace || len(cm.Data) != 1 {
			t.Errorf("ConfigMap %d is %s/%s with items %v; want %s/%s with %s only", n, cm.Namespace, cm.Name, cm.Data, testNamespace, RecordConfigMapName(configSecretName, n), RecordFile(n))
		}
		if cm.Labels[managedByLabel] != managedBy || !cmp.Equal(cm.OwnerReferences, owners) {
			t.Errorf("%s: labels %v, owners %v; want the manager's label and the owners given", cm.Name, cm.Labels, cm.OwnerReferences)
		}
		got, err := decodeRecordConfigMap(cm, n)
		if err != nil {
			t.Errorf("%s does not decode: %v", cm.Name, err)
		}
		for _, s := range got {
			found[s.Scope] = n
		}
	}
	for _, s := range scopes {
		if n, ok := found[s.Scope]; !ok || n != recordShard(s.Scope) {
			t.Errorf("scope %s is in ConfigMap %d (found %t); want %d", s.Scope, n, ok, recordShard(s.Scope))
		}
	}
	for n, cm := range cms {
		holdsScope := slices.Contains(slices.Collect(maps.Values(found)), n)
		if isEmpty := cm.Data[RecordFile(n)] == `{"apiVersion":"gateway.sluice.dev/v1","kind":"Record"}`; isEmpty == holdsScope {
			t.Errorf("%s holds %s; want an empty record exactly when no scope hashes to it", cm.Name, cm.Data[RecordFile(n)])
		}
	}

	// A gateway reads them, projected beside the configuration's Secrets.
	loaded := loadWithRecord(t, cms)
	want := append([]gatewayv1.ScopeRecord(nil), scopes...)
	sortScopes(want)
	got := append([]gatewayv1.ScopeRecord(nil), loaded.Record...)
	sortScopes(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the record a gateway loads (-want +got):\n%s", diff)
	}
}

// loadWithRecord compiles a plan, projects its Secrets and the record's
// ConfigMaps into one directory and loads config.yaml from it, as a gateway
// Pod does.
func loadWithRecord(t *testing.T, cms []*corev1.ConfigMap) *gatewayv1.Config {
	t.Helper()
	pq := quota("openai", 0, "gpt-4o")
	tp := plan("pro", 0, []string{"acme"}, []string{"openai"})
	in := &Inputs{
		ProviderQuotas: []v1alpha1.ProviderQuota{pq}, TenantPlans: []v1alpha1.TenantPlan{tp},
		Secrets: []corev1.Secret{providerSecret("openai", "sk-openai"), keySecret("acme-alice", "acme", "alice", "sk-alice")},
	}
	out, err := Compile(*in)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := configSecrets(types.NamespacedName{Namespace: testNamespace, Name: configSecretName}, in, out)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	project(t, dir, secrets)
	projectConfigMaps(t, dir, cms)
	cfg, err := gatewayv1.Load(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatalf("the configuration does not load with its record: %v", err)
	}
	return cfg
}

// projectConfigMaps writes the items of cms into dir, as a projected volume
// mounts them.
func projectConfigMaps(tb testing.TB, dir string, cms []*corev1.ConfigMap) {
	tb.Helper()
	for _, cm := range cms {
		for item, data := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, item), []byte(data), 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// TestRecordShardsSpread checks that tenants' scopes spread over every
// record ConfigMap.
func TestRecordShardsSpread(t *testing.T) {
	counts := make([]int, RecordShards)
	for i := range 1000 {
		counts[recordShard(tenantScope(fmt.Sprintf("tenant-%05d", i)))]++
	}
	for n, c := range counts {
		if c < 1000/RecordShards/2 {
			t.Errorf("record ConfigMap %d holds %d of 1000 tenants; want about %d", n, c, 1000/RecordShards)
		}
	}
}

// TestRecordCapacity checks the capacity RecordShards states: a tenant with
// 20,000 users of 20-character names, each with a daily quota used, fits
// one ConfigMap; 30,000 do not.
func TestRecordCapacity(t *testing.T) {
	withUsers := func(users int) gatewayv1.ScopeRecord {
		return recordScope("tenant:acme", 1_000_000, ending(midnight, usersUsing(users)))
	}
	for _, tc := range []struct {
		users int
		fits  bool
	}{{20_000, true}, {30_000, false}} {
		s := withUsers(tc.users)
		cms, err := recordConfigMaps(types.NamespacedName{Namespace: testNamespace, Name: configSecretName}, nil, shardRecord([]gatewayv1.ScopeRecord{s}))
		if err != nil {
			t.Fatal(err)
		}
		size := configMapDataSize(cms[recordShard(s.Scope)])
		if fits := size <= maxConfigMapSize; fits != tc.fits {
			t.Errorf("%d users take %d bytes: fits %t; want %t", tc.users, size, fits, tc.fits)
		}
	}
}

func TestConfigMapUpToDate(t *testing.T) {
	desired := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c-record-0", Labels: map[string]string{managedByLabel: managedBy},
			OwnerReferences: []metav1.OwnerReference{{Kind: "TenantPlan", Name: "pro", UID: "uid-tp"}}},
		Data: map[string]string{RecordFile(0): "{}"},
	}
	existing := desired.DeepCopy()
	existing.Labels["team"], existing.Annotations = "infra", map[string]string{"note": "hands off"}
	if !configMapUpToDate(existing, desired) {
		t.Errorf("a ConfigMap differing in someone else's label is not up to date")
	}
	existing.Data[RecordFile(0)] = `{"edited":"by hand"}`
	if configMapUpToDate(existing, desired) {
		t.Errorf("a ConfigMap with an item edited by hand is up to date")
	}
	existing.OwnerReferences = nil
	updateConfigMap(existing, desired)
	if !configMapUpToDate(existing, desired) || existing.Labels["team"] != "infra" || existing.Annotations["note"] != "hands off" {
		t.Errorf("after updateConfigMap: up to date %t, labels %v, annotations %v", configMapUpToDate(existing, desired), existing.Labels, existing.Annotations)
	}
}

func TestScopeObjects(t *testing.T) {
	pqs := []v1alpha1.ProviderQuota{quota("openai", 0), quota("llama", 0)}
	tps := []v1alpha1.TenantPlan{plan("pro", 0, []string{"acme", "globex"}, nil), plan("free", 0, []string{"initech"}, nil)}
	scopes := []gatewayv1.ScopeRecord{{Scope: "tenant:globex"}, {Scope: "openai"}, {Scope: "sluice:global"}, {Scope: "tenant:gone"}}
	var got []string
	for _, o := range scopeObjects(scopes, pqs, tps) {
		got = append(got, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	want := []string{"*v1alpha1.TenantPlan pro", "*v1alpha1.ProviderQuota openai"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scopeObjects (-want +got):\n%s", diff)
	}
}
