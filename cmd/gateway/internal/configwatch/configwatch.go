// Package configwatch keeps the gateway's configuration in step with its
// file. It loads the file at start, where a bad file is an error, and again
// whenever the file changes, where a bad file is refused and the
// configuration in force stays.
//
// It watches the file's directory rather than the file, so that it sees
// every way a file gets replaced: Kubernetes swapping the "..data" symlink
// of a mounted Secret or ConfigMap (or of a projected volume of several, as
// the configuration Secret and its tenant Secrets are mounted), an editor
// writing a temporary file and renaming it over the old one, and a file
// removed and written anew. A change of a tenant or record file the
// configuration names in the same directory reloads it too; one elsewhere is
// read at each reload, but not watched. Changes are debounced, so one update
// read as several events loads the file once.
//
// A reload takes the configuration file and its tenant files together or not
// at all: a tenant file missing, unreadable, invalid or, while the files are
// replaced one by one, not the one whose sha256 the configuration names,
// refuses the reload, and the configuration in force stays.
package configwatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// dataLink is the symlink that Kubernetes swaps atomically when it updates
// a mounted Secret or ConfigMap; the files are symlinks through it.
const dataLink = "..data"

// defaultDebounce is how long the directory must stay quiet after a change
// before the file is read: long enough for a swap or a save to finish, short
// enough that nobody waits for it.
const defaultDebounce = 100 * time.Millisecond

// Options configures a Watcher. The zero value is usable: nobody is called
// on reload, logs go to slog.Default() and the metrics are not registered.
type Options struct {
	// OnReload is called from Run's goroutine with each configuration that
	// a change brought in, after it loaded and validated; Config already
	// returns it. It is not called for the load in New. It may be called
	// with a configuration equal to the one in force (a file saved
	// unchanged, or swapped with a Secret whose other files changed), so it
	// must be idempotent. Nil means nobody is called.
	OnReload func(*gatewayv1.Config)
	// Logger receives reloads and refusals. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives sluice_config_reloads_total and
	// sluice_config_last_reload_success_timestamp_seconds. Nil means they
	// are not registered.
	Registerer prometheus.Registerer
	// Debounce is how long the directory must stay quiet after a change
	// before the file is read again. Zero means 100ms.
	Debounce time.Duration
}

// Watcher holds the gateway's configuration and reloads it when its file
// changes. Config is safe for concurrent use; Run is called once.
type Watcher struct {
	path      string
	opts      Options
	log       *slog.Logger
	metrics   *metrics
	current   atomic.Pointer[gatewayv1.Config]
	configSum atomic.Pointer[string] // the SHA-256 of the configuration file in force, hex
	loadedSum [sha256.Size]byte      // the files' fingerprint when New loaded them
}

// New loads the configuration file at path and returns a Watcher holding
// it. A file that does not load or validate is an error: the gateway refuses
// to start on a bad file. Call Run to follow the file's changes.
//
// For a mounted Secret or ConfigMap, path is the file as mounted (such as
// /etc/sluice/config.yaml), not a path through "..data", whose directory
// Kubernetes replaces on every update.
func New(path string, opts Options) (*Watcher, error) {
	// Hash before loading: a change in between then looks like a change to
	// Run, which loads the file again, rather than being missed. The tenant
	// files are known only once loaded.
	configSum := fileSum(path)
	cfg, err := gatewayv1.Load(path)
	if err != nil {
		return nil, fmt.Errorf("configwatch: %w", err)
	}
	sum := fingerprintOf(configSum, dependents(cfg))
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w := &Watcher{path: path, opts: opts, log: opts.Logger, metrics: m, loadedSum: sum}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.opts.Debounce <= 0 {
		w.opts.Debounce = defaultDebounce
	}
	w.store(cfg, configSum)
	m.succeeded()
	return w, nil
}

// ConfigSHA256 returns the lower-case hex SHA-256 of the configuration file in force, as it was
// read before it loaded: what the operator compares with the file it wrote.
func (w *Watcher) ConfigSHA256() string { return *w.configSum.Load() }

// store puts cfg in force, with the SHA-256 of the file it loaded from.
func (w *Watcher) store(cfg *gatewayv1.Config, sum [sha256.Size]byte) {
	hexSum := hex.EncodeToString(sum[:])
	w.configSum.Store(&hexSum)
	w.current.Store(cfg)
}

// Config returns the configuration in force: the last one that loaded. It
// is never nil.
func (w *Watcher) Config() *gatewayv1.Config {
	return w.current.Load()
}

// Run watches the file's directory and reloads the file after each change
// until ctx is done, when it returns nil. It returns an error if the
// directory cannot be watched.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("configwatch: %w", err)
	}
	defer fw.Close()
	dir := filepath.Dir(w.path)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("configwatch: watch %s: %w", dir, err)
	}
	return w.loop(ctx, fw)
}

// loop handles the watch's events until ctx is done. Each relevant event
// restarts the debounce timer; the file is loaded when it fires.
func (w *Watcher) loop(ctx context.Context, fw *fsnotify.Watcher) error {
	debounce := time.NewTimer(w.opts.Debounce)
	defer debounce.Stop()
	if fingerprintOf(fileSum(w.path), dependents(w.Config())) == w.loadedSum { // else it changed before the watch began
		debounce.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("configwatch: watch closed")
			}
			if w.relevant(ev) {
				debounce.Reset(w.opts.Debounce)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("configwatch: watch closed")
			}
			// Events may have been lost (fsnotify.ErrEventOverflow): look again.
			w.log.Warn("config watch error; reloading to be safe", "path", w.path, "err", err)
			debounce.Reset(w.opts.Debounce)
		case <-debounce.C:
			w.reload()
		}
	}
}

// relevant reports whether ev may have changed what path reads: the file
// itself, or a tenant or record file of the configuration in force, was
// written, created, renamed or removed, or Kubernetes swapped the
// directory's data.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Base(ev.Name)
	return name == filepath.Base(w.path) || name == dataLink || w.dependent(ev.Name)
}

// dependent reports whether path is one of the files the configuration in
// force reads beside its own.
func (w *Watcher) dependent(path string) bool {
	return slices.ContainsFunc(dependents(w.Config()), func(f string) bool { return filepath.Clean(f) == filepath.Clean(path) })
}

// dependents are the files a configuration reads beside its own: its tenant
// files and its record files.
func dependents(cfg *gatewayv1.Config) []string {
	out := make([]string, 0, len(cfg.TenantFiles)+len(cfg.RecordFiles))
	for _, f := range cfg.TenantFiles {
		out = append(out, f.Path)
	}
	return append(out, cfg.RecordFiles...)
}

// reload loads the file and puts it in force, or refuses it and keeps the
// configuration in force. The log names the file and the validation error,
// never the file's contents.
func (w *Watcher) reload() {
	sum := fileSum(w.path)
	cfg, err := gatewayv1.Load(w.path)
	if err != nil {
		w.log.Error("config reload refused; the previous config stays in force", "path", w.path, "err", err)
		w.metrics.failed()
		return
	}
	w.store(cfg, sum)
	w.log.Info("config reloaded", "path", w.path)
	w.metrics.succeeded()
	if w.opts.OnReload != nil {
		w.opts.OnReload(cfg)
	}
}

// fingerprintOf returns a hash of the configuration file's hash and of the
// files it reads beside.
func fingerprintOf(configSum [sha256.Size]byte, files []string) [sha256.Size]byte {
	h := sha256.New()
	h.Write(configSum[:])
	for _, f := range files {
		sum := fileSum(f)
		h.Write(sum[:])
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// fileSum returns the hash of the file at path, or zero if it cannot be
// read.
func fileSum(path string) [sha256.Size]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(data)
}
