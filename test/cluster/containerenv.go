package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerPath is the PATH a container runtime gives a container whose image sets none.
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envVar is one variable of a container's environment.
type envVar struct{ name, value string }

// environment is the container's environment, in the kubelet's order: envFrom, then env (each
// value expanded against the variables before it and the service variables), then the service
// variables not set otherwise (here only the API server's), then what the runtime adds.
func (p *runningPod) environment(ctx context.Context, c corev1.Container) ([]envVar, error) {
	var env []envVar
	set := func(name, value string) {
		env = slices.DeleteFunc(env, func(v envVar) bool { return v.name == name })
		env = append(env, envVar{name, value})
	}
	for _, from := range c.EnvFrom {
		data, err := p.envFromSource(ctx, from)
		if err != nil {
			return nil, err
		}
		for _, k := range sortedKeys(data) {
			set(from.Prefix+k, data[k])
		}
	}
	service := p.serviceEnvironment()
	for _, v := range c.Env {
		value, ok, err := p.envValue(ctx, c, v, env, service)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", v.Name, err)
		}
		if ok {
			set(v.Name, value)
		}
	}
	for _, v := range service {
		if lookup(env, v.name) == nil {
			env = append(env, v)
		}
	}
	for _, v := range []envVar{{"PATH", containerPath}, {"HOSTNAME", p.pod.Name}, {"HOME", "/"}} {
		if lookup(env, v.name) == nil {
			env = append(env, v)
		}
	}
	return env, nil
}

// serviceEnvironment is what a kubelet sets for the API server's Service, kubernetes.default.
func (p *runningPod) serviceEnvironment() []envVar {
	u, err := url.Parse(p.runner.cluster.Config.Host)
	if err != nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(u.Host)
	return []envVar{{"KUBERNETES_SERVICE_HOST", host}, {"KUBERNETES_SERVICE_PORT", port}}
}

func lookup(env []envVar, name string) *envVar {
	for i := range env {
		if env[i].name == name {
			return &env[i]
		}
	}
	return nil
}

// envValue resolves one env entry; ok is false when an optional source is missing.
func (p *runningPod) envValue(ctx context.Context, c corev1.Container, v corev1.EnvVar, env, service []envVar) (string, bool, error) {
	if v.ValueFrom == nil {
		return expand(v.Value, env, service), true, nil
	}
	from := v.ValueFrom
	switch {
	case from.FieldRef != nil:
		value, err := p.fieldValue(from.FieldRef.FieldPath)
		return value, err == nil, err
	case from.ResourceFieldRef != nil:
		value, err := resourceValue(p.pod, c.Name, from.ResourceFieldRef)
		return value, err == nil, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		data, err := p.secretData(ctx, ref.Name)
		return keyOf(data, err, "Secret", ref.Name, ref.Key, ref.Optional)
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		data, err := p.configMapData(ctx, ref.Name)
		return keyOf(data, err, "ConfigMap", ref.Name, ref.Key, ref.Optional)
	}
	return "", false, fmt.Errorf("valueFrom names no source")
}

// keyOf takes a key of a Secret's or ConfigMap's data, or reports it missing: an error unless
// optional.
func keyOf(data map[string][]byte, err error, kind, name, key string, optional *bool) (string, bool, error) {
	isOptional := optional != nil && *optional
	if apierrors.IsNotFound(err) {
		if isOptional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s %s does not exist", kind, name)
	}
	if err != nil {
		return "", false, err
	}
	value, ok := data[key]
	if !ok && !isOptional {
		return "", false, fmt.Errorf("%s %s has no key %s", kind, name, key)
	}
	return string(value), ok, nil
}

func (p *runningPod) envFromSource(ctx context.Context, from corev1.EnvFromSource) (map[string]string, error) {
	var data map[string][]byte
	var err error
	var optional *bool
	var kind, name string
	switch {
	case from.SecretRef != nil:
		kind, name, optional = "Secret", from.SecretRef.Name, from.SecretRef.Optional
		data, err = p.secretData(ctx, name)
	case from.ConfigMapRef != nil:
		kind, name, optional = "ConfigMap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional
		data, err = p.configMapData(ctx, name)
	default:
		return nil, fmt.Errorf("envFrom names no source")
	}
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("envFrom %s %s: %w", kind, name, err)
	}
	out := map[string]string{}
	for k, v := range data {
		out[k] = string(v)
	}
	return out, nil
}

func (p *runningPod) secretData(ctx context.Context, name string) (map[string][]byte, error) {
	s, err := p.runner.cluster.Clientset.CoreV1().Secrets(p.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data, nil
}

func (p *runningPod) configMapData(ctx context.Context, name string) (map[string][]byte, error) {
	cm, err := p.runner.cluster.Clientset.CoreV1().ConfigMaps(p.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

// subscript matches metadata.labels['key'] and metadata.annotations['key'].
var subscript = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.+)'\]$`)

// fieldValue is the value of a fieldRef, as the kubelet resolves it.
func (p *runningPod) fieldValue(path string) (string, error) {
	pod := p.pod
	if m := subscript.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return p.ip, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("fieldRef %s is not supported", path)
}

// formatMap writes labels or annotations as a downwardAPI volume does: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range sortedKeys(m) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceValue is a resourceFieldRef's value: the container's request or limit, divided by the
// divisor and rounded up. A limit not set is refused here (a kubelet would give the node's
// allocatable, which a host-network test has no figure for).
func resourceValue(pod *corev1.Pod, container string, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		container = ref.ContainerName
	}
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return "", fmt.Errorf("resourceFieldRef: no container %s", container)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := pod.Spec.Containers[i].Resources.Limits
	if kind == "requests" {
		list = pod.Spec.Containers[i].Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %s: not set in container %s", ref.Resource, container)
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	n := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
	return fmt.Sprint(n), nil
}

// expand replaces $(VAR) in s with VAR's value from the contexts, in order, as Kubernetes does: a
// reference to a variable that none defines stays as it is, $$ is a $, and any other $ stays.
func expand(s string, contexts ...[]envVar) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(' && strings.IndexByte(s[i+2:], ')') >= 0:
			end := i + 2 + strings.IndexByte(s[i+2:], ')')
			b.WriteString(resolve(s[i+2:end], contexts))
			i = end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func resolve(name string, contexts [][]envVar) string {
	for _, env := range contexts {
		if v := lookup(env, name); v != nil {
			return v.value
		}
	}
	return "$(" + name + ")"
}

// hostlessListen matches a listen address without a host, as ":8080".
var hostlessListen = regexp.MustCompile(`^:[0-9]+$`)

// arguments are the program's arguments: the container's command after its first word (the
// image's one program stands for it) and its args, each expanded against env; a listen address
// without a host gets the Pod's address, and the image's BindAddressFlag is added (see
// ContainerRunner).
func (p *runningPod) arguments(c corev1.Container, env []envVar, image Image) []string {
	var args []string
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	args = append(args, c.Args...)
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		out = append(out, p.onPodAddress(expand(a, env)))
	}
	if image.BindAddressFlag != "" {
		out = append(out, image.BindAddressFlag+"="+p.ip)
	}
	return out
}

// onPodAddress turns ":8080" and "--flag=:8080" into the same on the Pod's address.
func (p *runningPod) onPodAddress(arg string) string {
	if hostlessListen.MatchString(arg) {
		return p.ip + arg
	}
	if flag, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") && hostlessListen.MatchString(value) {
		return flag + "=" + p.ip + value
	}
	return arg
}

func envList(env []envVar) []string {
	out := make([]string, len(env))
	for i, v := range env {
		out[i] = v.name + "=" + v.value
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
