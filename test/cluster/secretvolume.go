package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	c.MountProjected(t, namespace, Projection{Secrets: names}, dir, last)
}

// Projection names the sources of a projected volume: Secrets, which must all exist, and
// ConfigMaps, each optional, as a gateway Pod mounts its configuration's Secrets and its record's
// ConfigMaps.
type Projection struct {
	// Secrets are the Secrets the volume waits for.
	Secrets []string
	// OptionalConfigMaps are ConfigMaps the volume holds while they exist.
	OptionalConfigMaps []string
}

// MountProjected is MountSecrets of a projection: it waits until every Secret exists, writes the
// items of the Secrets and of the ConfigMaps that exist into files of dir, and writes them again
// whenever one of them changes, appears or goes, until the test ends. The files of a ConfigMap
// that goes are removed, as the kubelet removes them.
func (c *Cluster) MountProjected(t testing.TB, namespace string, p Projection, dir, last string) {
	t.Helper()
	written, files := "", map[string]bool{}
	mount := func(ctx context.Context) bool {
		items, versions, err := c.readProjection(ctx, namespace, p)
		if err != nil || versions == written {
			return err == nil
		}
		if err := writeItems(dir, last, items); err != nil {
			t.Errorf("cluster: mount %+v of %s: %v", p, namespace, err) // not Fatal: it runs on its own goroutine too
			return false
		}
		if err := removeGone(dir, files, items); err != nil {
			t.Errorf("cluster: mount %+v of %s: %v", p, namespace, err)
			return false
		}
		written = versions
		return true
	}
	deadline := time.Now().Add(secretTimeout)
	for !mount(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster: the Secrets %v of %s are not all there after %s", p.Secrets, namespace, secretTimeout)
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

// readProjection returns the items of the projection's Secrets and of its ConfigMaps that
// exist, together, and their resource versions, which change when any of them does.
func (c *Cluster) readProjection(ctx context.Context, namespace string, p Projection) (map[string][]byte, string, error) {
	items := map[string][]byte{}
	var versions []string
	for _, name := range p.Secrets {
		s, err := c.Clientset.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("read Secret %s: %w", name, err)
		}
		maps.Copy(items, s.Data)
		versions = append(versions, s.ResourceVersion)
	}
	for _, name := range p.OptionalConfigMaps {
		cm, err := c.Clientset.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			versions = append(versions, "-")
			continue
		case err != nil:
			return nil, "", fmt.Errorf("read ConfigMap %s: %w", name, err)
		}
		for item, v := range cm.Data {
			items[item] = []byte(v)
		}
		maps.Copy(items, cm.BinaryData)
		versions = append(versions, cm.ResourceVersion)
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

// removeGone removes the files of dir that files names and items no longer holds, and makes
// files name the items.
func removeGone(dir string, files map[string]bool, items map[string][]byte) error {
	for name := range files {
		if _, ok := items[name]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		delete(files, name)
	}
	for name := range items {
		files[name] = true
	}
	return nil
}
