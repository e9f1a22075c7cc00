package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// secretTimeout bounds the wait for mounted Secrets to exist.
	secretTimeout = 2 * time.Minute
	// secretSyncPeriod is how often mounted Secrets are read again.
	secretSyncPeriod = 200 * time.Millisecond
)

// MountSecrets plays the kubelet's projected volume of Secrets: it waits until every named
// Secret exists, writes each of their keys into a file of dir, and writes them again whenever
// one changes, until the test ends. Each file is written aside and renamed into place, last (when
// set) after the others, so that a process that reads last never reads half a file, nor one whose
// companions are not there yet.
func (c *Cluster) MountSecrets(t testing.TB, namespace string, names []string, dir, last string) {
	t.Helper()
	written := ""
	mount := func(ctx context.Context) bool {
		items, versions, err := c.readSecrets(ctx, namespace, names)
		if err != nil || versions == written {
			return err == nil
		}
		if err := writeItems(dir, last, items); err != nil {
			t.Errorf("cluster: mount Secrets %v of %s: %v", names, namespace, err) // not Fatal: it runs on its own goroutine too
			return false
		}
		written = versions
		return true
	}
	deadline := time.Now().Add(secretTimeout)
	for !mount(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster: the Secrets %v of %s are not all there after %s", names, namespace, secretTimeout)
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

// readSecrets returns the items of the named Secrets together, and their resource versions,
// which change when any of them does.
func (c *Cluster) readSecrets(ctx context.Context, namespace string, names []string) (map[string][]byte, string, error) {
	items := map[string][]byte{}
	var versions []string
	for _, name := range names {
		s, err := c.Clientset.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("read Secret %s: %w", name, err)
		}
		maps.Copy(items, s.Data)
		versions = append(versions, s.ResourceVersion)
	}
	return items, strings.Join(versions, ","), nil
}

// writeItems writes each item into a file of dir, last after the others, each by a rename.
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
