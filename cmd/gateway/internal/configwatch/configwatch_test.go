package configwatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// timeout bounds every wait: far longer than a reload takes, so that only a
// reload that never comes fails a test.
const timeout = 10 * time.Second

// config returns a valid configuration file whose provider allows rpm
// requests a minute, so that tests can tell versions apart.
func config(rpm int) string {
	return fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: openai
    baseURL: http://127.0.0.1:8081/v1
    models: [{name: gpt-4o-mini}]
    requestsPerMinute: %d
`, rpm)
}

// invalid is a configuration file that parses but does not validate. Its
// comment stands for contents that must never reach a log.
const invalid = `# sk-do-not-log-me
apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
server: {maxBodyBytes: -1}
`

// write replaces the file at path atomically, so that a reload never reads
// it half-written and each test sees exactly the loads it expects.
func write(t *testing.T, path, contents string) {
	t.Helper()
	tmp := path + ".tmp"
	must(t, os.WriteFile(tmp, []byte(contents), 0o600))
	must(t, os.Rename(tmp, path))
}

func rpm(c *gatewayv1.Config) int64 {
	return c.Providers[0].RequestsPerMinute
}

// syncBuffer is a log destination the test reads while Run writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is a running Watcher and what it reported.
type harness struct {
	w        *Watcher
	reg      *prometheus.Registry
	reloaded chan *gatewayv1.Config
	log      *syncBuffer
}

// start creates a Watcher on path and runs it until the test ends.
func start(t *testing.T, path string) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewPedanticRegistry(), reloaded: make(chan *gatewayv1.Config, 10), log: &syncBuffer{}}
	w, err := New(path, Options{
		OnReload:   func(c *gatewayv1.Config) { h.reloaded <- c },
		Logger:     slog.New(slog.NewTextHandler(h.log, nil)),
		Registerer: h.reg,
		Debounce:   10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	h.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() error = %v", err)
		}
	})
	return h
}

// next waits for the next reload and returns its configuration.
func (h *harness) next(t *testing.T) *gatewayv1.Config {
	t.Helper()
	select {
	case c := <-h.reloaded:
		return c
	case <-time.After(timeout):
		t.Fatalf("no reload within %s; log:\n%s", timeout, h.log)
		return nil
	}
}

// waitFailures waits until n reloads have failed.
func (h *harness) waitFailures(t *testing.T, n float64) {
	t.Helper()
	failures := h.w.metrics.reloads.WithLabelValues("failure")
	for deadline := time.Now().Add(timeout); testutil.ToFloat64(failures) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("failures = %v after %s, want %v; log:\n%s", testutil.ToFloat64(failures), timeout, n, h.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) successes() float64 {
	return testutil.ToFloat64(h.w.metrics.reloads.WithLabelValues("success"))
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	valid, bad := filepath.Join(dir, "valid.yaml"), filepath.Join(dir, "bad.yaml")
	write(t, valid, config(1500))
	write(t, bad, invalid)
	tests := []struct {
		name    string
		path    string
		wantRPM int64
		wantErr string
	}{
		{name: "valid file", path: valid, wantRPM: 1500},
		{name: "invalid file", path: bad, wantErr: "server.maxBodyBytes: Invalid value: -1"},
		{name: "missing file", path: filepath.Join(dir, "absent.yaml"), wantErr: "absent.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			w, err := New(tc.path, Options{Registerer: reg})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tc.wantErr)
				}
				if n, _ := testutil.GatherAndCount(reg); n != 0 {
					t.Errorf("a failed New registered %d metrics, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if got := rpm(w.Config()); got != tc.wantRPM {
				t.Errorf("Config() requestsPerMinute = %d, want %d", got, tc.wantRPM)
			}
			if got := testutil.ToFloat64(w.metrics.lastSuccess); got <= 0 {
				t.Errorf("last success timestamp = %v, want the time of the load", got)
			}
		})
	}
}

func TestMetricsExposition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, config(1500))
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(path, Options{Registerer: reg}); err != nil {
		t.Fatalf("New() error = %v", err)
	}
	want := `# HELP sluice_config_reloads_total Loads of the gateway configuration file, the one at start included, by result (success or failure).
# TYPE sluice_config_reloads_total counter
sluice_config_reloads_total{result="failure"} 0
sluice_config_reloads_total{result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_config_reloads_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_config_last_reload_success_timestamp_seconds"); err != nil || n != 1 {
		t.Errorf("last success timestamp series = %d, %v, want 1", n, err)
	}
}

func TestReloadOnChange(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{name: "written in place", change: func(t *testing.T, path string) {
			// A reload may catch the file truncated and fail; the write's
			// own event brings the new file in all the same.
			must(t, os.WriteFile(path, []byte(config(2000)), 0o600))
		}},
		{name: "renamed over by an editor", change: func(t *testing.T, path string) {
			write(t, path, config(2000))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			write(t, path, config(1500))
			h := start(t, path)
			tc.change(t, path)
			if got := rpm(h.next(t)); got != 2000 {
				t.Errorf("reloaded requestsPerMinute = %d, want 2000", got)
			}
			if got := rpm(h.w.Config()); got != 2000 {
				t.Errorf("Config() requestsPerMinute = %d, want 2000", got)
			}
			if got := h.successes(); got < 2 { // the load in New, then at least this one
				t.Errorf("successes = %v, want at least 2", got)
			}
			if sum := sha256.Sum256([]byte(config(2000))); h.w.ConfigSHA256() != hex.EncodeToString(sum[:]) {
				t.Errorf("ConfigSHA256() = %s; want the SHA-256 of the file in force", h.w.ConfigSHA256())
			}
		})
	}
}

func TestInvalidChangeRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, config(1500))
	h := start(t, path)

	write(t, path, invalid)
	h.waitFailures(t, 1)
	if got := rpm(h.w.Config()); got != 1500 {
		t.Errorf("Config() requestsPerMinute = %d after a bad file, want the old 1500", got)
	}
	log := h.log.String()
	if !strings.Contains(log, "server.maxBodyBytes: Invalid value: -1") || !strings.Contains(log, "level=ERROR") {
		t.Errorf("log = %q, want an error naming the invalid field", log)
	}
	if strings.Contains(log, "sk-do-not-log-me") {
		t.Errorf("log = %q, want no file contents in it", log)
	}

	// The next good file is applied; the bad one never was.
	write(t, path, config(3000))
	if got := rpm(h.next(t)); got != 3000 {
		t.Errorf("reloaded requestsPerMinute = %d, want 3000", got)
	}
	if got := h.successes(); got != 2 {
		t.Errorf("successes = %v, want 2", got)
	}
}

func TestRemovedAndRecreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, config(1500))
	h := start(t, path)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.waitFailures(t, 1)
	if got := rpm(h.w.Config()); got != 1500 {
		t.Errorf("Config() requestsPerMinute = %d with the file gone, want the old 1500", got)
	}
	write(t, path, config(2500))
	if got := rpm(h.next(t)); got != 2500 {
		t.Errorf("reloaded requestsPerMinute = %d, want 2500", got)
	}
}

// kubeletWrite lays out dir the way the kubelet's atomic writer updates a
// mounted Secret: the files go into a new hidden directory, a "..data_tmp"
// symlink to it is renamed over "..data", and the old directory is removed.
// The visible config.yaml is a symlink through "..data" that never changes.
func kubeletWrite(t *testing.T, dir, version, contents string) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	ts := "..2026_01_01_00_00_00." + version
	must(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	write(t, filepath.Join(dir, ts, "config.yaml"), contents)
	must(t, os.Symlink(ts, filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, dataLink)))
	if old == "" {
		must(t, os.Symlink(filepath.Join(dataLink, "config.yaml"), filepath.Join(dir, "config.yaml")))
		return
	}
	must(t, os.RemoveAll(filepath.Join(dir, old)))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestKubernetesSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	kubeletWrite(t, dir, "1", config(1500))
	h := start(t, filepath.Join(dir, "config.yaml"))

	kubeletWrite(t, dir, "2", config(2000))
	if got := rpm(h.next(t)); got != 2000 {
		t.Errorf("reloaded requestsPerMinute = %d, want 2000", got)
	}
	kubeletWrite(t, dir, "3", invalid)
	h.waitFailures(t, 1)
	kubeletWrite(t, dir, "4", config(4000))
	if got := rpm(h.next(t)); got != 4000 {
		t.Errorf("reloaded requestsPerMinute = %d, want 4000", got)
	}
}

func TestRelevant(t *testing.T) {
	w := &Watcher{path: "/etc/sluice/config.yaml"}
	w.current.Store(&gatewayv1.Config{TenantFiles: []gatewayv1.TenantFile{{Path: "/etc/sluice/tenants-0.yaml"}}})
	tests := []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{name: "/etc/sluice/config.yaml", op: fsnotify.Write, want: true},
		{name: "/etc/sluice/config.yaml", op: fsnotify.Create, want: true},
		{name: "/etc/sluice/config.yaml", op: fsnotify.Remove, want: true},
		{name: "/etc/sluice/config.yaml", op: fsnotify.Rename, want: true},
		{name: "/etc/sluice/config.yaml", op: fsnotify.Write | fsnotify.Chmod, want: true},
		{name: "/etc/sluice/config.yaml", op: fsnotify.Chmod, want: false},
		{name: "/etc/sluice/..data", op: fsnotify.Create, want: true},
		{name: "/etc/sluice/..data_tmp", op: fsnotify.Rename, want: false},
		{name: "/etc/sluice/..2026_01_01_00_00_00.1", op: fsnotify.Create, want: false},
		{name: "/etc/sluice/config.yaml.swp", op: fsnotify.Write, want: false},
		{name: "/etc/sluice/openai.key", op: fsnotify.Create, want: false},
		{name: "/etc/sluice/tenants-0.yaml", op: fsnotify.Create, want: true},
		{name: "/etc/sluice/tenants-1.yaml", op: fsnotify.Create, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.op.String()+" "+tc.name, func(t *testing.T) {
			if got := w.relevant(fsnotify.Event{Name: tc.name, Op: tc.op}); got != tc.want {
				t.Errorf("relevant() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestChangeBeforeRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, config(1500))
	reloaded := make(chan *gatewayv1.Config, 1)
	w, err := New(path, Options{OnReload: func(c *gatewayv1.Config) { reloaded <- c }, Debounce: time.Millisecond})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	must(t, os.WriteFile(path, []byte(config(1600)), 0o600)) // in place, same size: only the contents differ

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case c := <-reloaded:
		if diff := cmp.Diff(c, w.Config()); diff != "" || rpm(c) != 1600 {
			t.Errorf("reloaded requestsPerMinute = %d, want 1600; Config() differs (-reloaded +Config):\n%s", rpm(c), diff)
		}
	case <-time.After(timeout):
		t.Fatalf("a change made before Run was not loaded within %s", timeout)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, config(1500))
	w, err := New(path, Options{})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run() error = %v, want nil", err)
	}
}

func TestRunMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mount")
	must(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "config.yaml")
	write(t, path, config(1500))
	w, err := New(path, Options{})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	must(t, os.RemoveAll(dir))
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "configwatch: watch") {
		t.Errorf("Run() error = %v, want one about the watch", err)
	}
}

// withTenantFile is config(rpm) with a plan and a tenant file that holds
// the plan's tenants.
func withTenantFile(rpm int) string {
	return config(rpm) + `plans: [{name: pro, providers: [openai]}]
tenantFiles: [{path: tenants-0.yaml}]
`
}

// tenants is a tenant file whose tenant acme holds the key of hash.
func tenants(hash string) string {
	return `apiVersion: gateway.sluice.dev/v1
kind: TenantList
tenants: [{name: acme, plan: pro, keys: [{sha256: ` + hash + `, user: alice}]}]
`
}

func TestTenantFileChanges(t *testing.T) {
	dir := t.TempDir()
	path, shard := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "tenants-0.yaml")
	write(t, shard, tenants(gatewayv1.HashKey("sk-alice-1")))
	write(t, path, withTenantFile(1500))
	h := start(t, path)
	key := func(c *gatewayv1.Config) string { return c.Tenants[0].Keys[0].SHA256 }

	// A changed tenant file alone reloads the configuration.
	write(t, shard, tenants(gatewayv1.HashKey("sk-alice-2")))
	if got := key(h.next(t)); got != gatewayv1.HashKey("sk-alice-2") {
		t.Fatalf("reloaded key = %.8s; want the new key's hash", got)
	}

	// A missing or corrupt tenant file is refused with the file's name, and
	// the configuration in force stays.
	must(t, os.Remove(shard))
	h.waitFailures(t, 1)
	write(t, shard, "apiVersion: gateway.sluice.dev/v1\nkind: TenantList\ntenants: [{name: acme,")
	h.waitFailures(t, 2)
	if got := key(h.w.Config()); got != gatewayv1.HashKey("sk-alice-2") {
		t.Errorf("Config() key = %.8s after bad tenant files; want the last good one", got)
	}
	log := h.log.String()
	for _, want := range []string{"tenants-0.yaml: no such file or directory", "tenants-0.yaml: parse tenant file as YAML"} {
		if !strings.Contains(log, want) {
			t.Errorf("log = %q; want %q in it", log, want)
		}
	}

	// The next good tenant file is applied.
	write(t, shard, tenants(gatewayv1.HashKey("sk-alice-3")))
	if got := key(h.next(t)); got != gatewayv1.HashKey("sk-alice-3") {
		t.Errorf("reloaded key = %.8s; want the third key's hash", got)
	}
}
