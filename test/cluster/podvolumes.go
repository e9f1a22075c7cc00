package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// defaultFileMode is the mode of a volume's files when the manifest names none (420).
	defaultFileMode = 0o644
	// defaultTokenSeconds is a projected token's life when the manifest names none.
	defaultTokenSeconds = 3600
	// dataLink is the symlink a kubelet swaps to replace a volume's files all at once.
	dataLink = "..data"
)

// errSourceMissing says that a volume's non-optional Secret or ConfigMap does not exist (yet).
var errSourceMissing = errors.New("missing")

// volumeFile is one file of a volume.
type volumeFile struct {
	data []byte
	mode fs.FileMode
}

// podVolumes are a Pod's volumes, each a directory that the Pod's containers bind.
type podVolumes struct {
	pod  *runningPod
	dirs map[string]string // by volume name

	mu      sync.Mutex
	written map[string]map[string]volumeFile // by volume name: the files last written
	tokens  map[string]issuedToken           // by volume name and path
}

type issuedToken struct {
	token   []byte
	refresh time.Time
}

// mountVolumes creates the Pod's volumes, waiting, as a kubelet does, until each non-optional
// Secret and ConfigMap they name exists.
func (p *runningPod) mountVolumes(ctx context.Context) (*podVolumes, error) {
	v := &podVolumes{pod: p, dirs: map[string]string{}, written: map[string]map[string]volumeFile{}, tokens: map[string]issuedToken{}}
	for _, vol := range p.pod.Spec.Volumes {
		dir := filepath.Join(p.dir, vol.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		v.dirs[vol.Name] = dir
	}
	for {
		err := v.sync(ctx)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, errSourceMissing) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(secretSyncPeriod):
		}
	}
}

// keepInSync writes the volumes again whenever a source changes, until ctx ends. A source that
// goes leaves the files it last gave, as with a kubelet.
func (v *podVolumes) keepInSync(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(secretSyncPeriod):
		}
		if err := v.sync(ctx); err != nil && !errors.Is(err, errSourceMissing) && ctx.Err() == nil {
			v.pod.runner.t.Logf("cluster: pod %s: volumes: %v", v.pod.pod.Name, err)
		}
	}
}

// sync writes each volume whose files changed.
func (v *podVolumes) sync(ctx context.Context) error {
	for _, vol := range v.pod.pod.Spec.Volumes {
		files, err := v.files(ctx, vol)
		if err != nil {
			return fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		if files == nil || sameFiles(v.written[vol.Name], files) {
			continue
		}
		if err := writeVolume(v.dirs[vol.Name], files); err != nil {
			return fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		v.written[vol.Name] = files
	}
	return nil
}

func sameFiles(a, b map[string]volumeFile) bool {
	return maps.EqualFunc(a, b, func(x, y volumeFile) bool { return x.mode == y.mode && bytes.Equal(x.data, y.data) })
}

// files are the files a volume holds now; nil for a volume whose directory is its content.
func (v *podVolumes) files(ctx context.Context, vol corev1.Volume) (map[string]volumeFile, error) {
	src := vol.VolumeSource
	files := map[string]volumeFile{}
	var err error
	switch {
	case src.EmptyDir != nil:
		return nil, nil
	case src.Secret != nil:
		err = v.addSecret(ctx, files, src.Secret.SecretName, src.Secret.Items, src.Secret.Optional, src.Secret.DefaultMode)
	case src.ConfigMap != nil:
		err = v.addConfigMap(ctx, files, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, src.ConfigMap.DefaultMode)
	case src.DownwardAPI != nil:
		err = v.addDownwardAPI(files, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
	case src.Projected != nil:
		for _, s := range src.Projected.Sources {
			if err = v.addProjection(ctx, files, vol.Name, s, src.Projected.DefaultMode); err != nil {
				break
			}
		}
	default:
		return nil, fmt.Errorf("this kind of volume is not supported")
	}
	return files, err
}

func (v *podVolumes) addProjection(ctx context.Context, files map[string]volumeFile, volume string, s corev1.VolumeProjection, mode *int32) error {
	switch {
	case s.Secret != nil:
		return v.addSecret(ctx, files, s.Secret.Name, s.Secret.Items, s.Secret.Optional, mode)
	case s.ConfigMap != nil:
		return v.addConfigMap(ctx, files, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, mode)
	case s.DownwardAPI != nil:
		return v.addDownwardAPI(files, s.DownwardAPI.Items, mode)
	case s.ServiceAccountToken != nil:
		token, err := v.token(ctx, volume, s.ServiceAccountToken)
		files[s.ServiceAccountToken.Path] = volumeFile{token, fileMode(mode)}
		return err
	}
	return fmt.Errorf("a projection of a kind not supported")
}

func (v *podVolumes) addSecret(ctx context.Context, files map[string]volumeFile, name string, items []corev1.KeyToPath, optional *bool, mode *int32) error {
	data, err := v.pod.secretData(ctx, name)
	return addKeys(files, "Secret "+name, data, err, items, optional, mode)
}

func (v *podVolumes) addConfigMap(ctx context.Context, files map[string]volumeFile, name string, items []corev1.KeyToPath, optional *bool, mode *int32) error {
	data, err := v.pod.configMapData(ctx, name)
	return addKeys(files, "ConfigMap "+name, data, err, items, optional, mode)
}

// addKeys adds a Secret's or ConfigMap's keys as files: all of them, or the items named. A source
// that does not exist, or lacks an item, is errSourceMissing unless optional.
func addKeys(files map[string]volumeFile, source string, data map[string][]byte, err error, items []corev1.KeyToPath, optional *bool, mode *int32) error {
	isOptional := optional != nil && *optional
	if apierrors.IsNotFound(err) {
		if isOptional {
			return nil
		}
		return fmt.Errorf("%s: %w", source, errSourceMissing)
	}
	if err != nil {
		return err
	}
	if len(items) == 0 {
		for k, d := range data {
			files[k] = volumeFile{d, fileMode(mode)}
		}
		return nil
	}
	for _, item := range items {
		d, ok := data[item.Key]
		if !ok {
			if isOptional {
				continue
			}
			return fmt.Errorf("%s has no key %s: %w", source, item.Key, errSourceMissing)
		}
		m := mode
		if item.Mode != nil {
			m = item.Mode
		}
		files[item.Path] = volumeFile{d, fileMode(m)}
	}
	return nil
}

func (v *podVolumes) addDownwardAPI(files map[string]volumeFile, items []corev1.DownwardAPIVolumeFile, mode *int32) error {
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = v.pod.fieldValue(item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			value, err = resourceValue(v.pod.pod, "", item.ResourceFieldRef)
		default:
			err = fmt.Errorf("downwardAPI item %s names no field", item.Path)
		}
		if err != nil {
			return err
		}
		m := mode
		if item.Mode != nil {
			m = item.Mode
		}
		files[item.Path] = volumeFile{[]byte(value), fileMode(m)}
	}
	return nil
}

func fileMode(mode *int32) fs.FileMode {
	if mode == nil {
		return defaultFileMode
	}
	return fs.FileMode(*mode)
}

// token is a service-account token for the Pod, from the TokenRequest API, bound to the Pod, for
// the projection's audience and life; it is asked for again after 80% of its life, as a kubelet
// does.
func (v *podVolumes) token(ctx context.Context, volume string, p *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	key := volume + "/" + p.Path
	if t, ok := v.tokens[key]; ok && time.Now().Before(t.refresh) {
		return t.token, nil
	}
	pod := v.pod.pod
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(p.ExpirationSeconds, defaultTokenSeconds)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	issued, err := v.pod.runner.cluster.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, account, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for ServiceAccount %s: %w", account, err)
	}
	life := issued.Status.ExpirationTimestamp.Sub(time.Now())
	v.tokens[key] = issuedToken{[]byte(issued.Status.Token), time.Now().Add(life * 8 / 10)}
	return []byte(issued.Status.Token), nil
}

// writeVolume replaces a volume's files as a kubelet's atomic writer does: they are written into
// a new timestamped directory, the "..data" symlink is swapped to it by a rename, each top-level
// name is a symlink through "..data", and the previous directory goes.
func writeVolume(dir string, files map[string]volumeFile) error {
	previous, _ := os.Readlink(filepath.Join(dir, dataLink))
	stamp := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	for path, f := range files {
		target := filepath.Join(dir, stamp, path)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(target, f.mode); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, stamp), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, dataLink+"_tmp")
	os.Remove(tmp)
	if err := os.Symlink(stamp, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return err
	}
	if err := linkTopLevel(dir, files); err != nil {
		return err
	}
	if previous != "" {
		return os.RemoveAll(filepath.Join(dir, previous))
	}
	return nil
}

// linkTopLevel makes each top-level name of files a symlink through "..data", and removes the
// symlinks of names no longer there.
func linkTopLevel(dir string, files map[string]volumeFile) error {
	top := map[string]bool{}
	for path := range files {
		name, _, _ := strings.Cut(filepath.ToSlash(path), "/")
		top[name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return err
		}
	}
	return nil
}
