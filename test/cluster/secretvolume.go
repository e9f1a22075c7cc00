package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// secretTimeout bounds the wait for a mounted Secret to exist.
	secretTimeout = 2 * time.Minute
	// secretSyncPeriod is how often a mounted Secret is read again.
	secretSyncPeriod = 200 * time.Millisecond
)

// MountSecret plays the kubelet's Secret volume: it waits until the Secret exists, writes each of
// its keys into a file of dir, and writes them again whenever the Secret changes, until the test
// ends. Each file is written aside and renamed into place, file (when set) last, so that a
// process that reads file never reads half a file, nor one whose companions are not there yet.
func (c *Cluster) MountSecret(t testing.TB, namespace, name, dir, file string) {
	t.Helper()
	secrets := c.Clientset.CoreV1().Secrets(namespace)
	written := ""
	mount := func(ctx context.Context) bool {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil || s.ResourceVersion == written {
			return err == nil
		}
		if err := writeItems(dir, file, s.Data); err != nil {
			t.Errorf("cluster: mount Secret %s/%s: %v", namespace, name, err) // not Fatal: it runs on its own goroutine too
			return false
		}
		written = s.ResourceVersion
		return true
	}
	deadline := time.Now().Add(secretTimeout)
	for !mount(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster: no Secret %s/%s after %s", namespace, name, secretTimeout)
		}
		time.Sleep(secretSyncPeriod)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(secretSyncPeriod):
				mount(ctx)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// writeItems writes each item into a file of dir, last, each by a rename.
func writeItems(dir, last string, items map[string][]byte) error {
	var names []string
	for name := range items {
		if name != last {
			names = append(names, name)
		}
	}
	if _, ok := items[last]; ok {
		names = append(names, last)
	}
	for _, name := range names {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, items[name], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
