package agent

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// expand replaces $(VAR) references the way the kubelet does for env values, command and args
// (https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/):
// defined variables are substituted, $$ escapes a $, and undefined references stay as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// containerEnv computes a container's environment: the image's, then envFrom sources in order, then
// env entries (each may refer to earlier ones with $(VAR)), as the kubelet and the runtime do.
// Service links (FOO_SERVICE_HOST with cluster IPs) are deliberately not injected: nothing in the rig
// may connect to a cluster IP. The one exception every kubelet makes, the API server's
// KUBERNETES_SERVICE_HOST and _PORT (with which client-go's in-cluster configuration finds it), is
// set, to the API server's own loopback address in place of the kubernetes Service's cluster IP.
func (w *podWorker) containerEnv(ctx context.Context, c *corev1.Container, kind emulated) ([]string, map[string]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH", defaultPath)
	set("HOSTNAME", w.hostname())
	// mysqlctl's image has no /etc/passwd: runtimes give such a user HOME=/ (and the host's
	// /root/.kube/config must not stand in for the pod's in-cluster configuration).
	if kind == imageMysqlctl {
		set("HOME", "/")
	} else {
		set("HOME", "/root")
	}
	if w.a.apiHost != "" {
		set("KUBERNETES_SERVICE_HOST", w.a.apiHost)
		set("KUBERNETES_SERVICE_PORT", w.a.apiPort)
		set("KUBERNETES_SERVICE_PORT_HTTPS", w.a.apiPort)
	}
	if kind == imageMariaDB {
		set("GOSU_VERSION", "1.17")
		set("LANG", "C.UTF-8")
		set("MARIADB_VERSION", "1:"+w.a.img.version)
		if v := reportedVersion(c.Image, w.a.img.version); v != "" {
			set("RIG_REPORTED_VERSION", v)
		}
	}
	for _, src := range c.EnvFrom {
		switch {
		case src.ConfigMapRef != nil:
			cm, err := w.a.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, src.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if src.ConfigMapRef.Optional != nil && *src.ConfigMapRef.Optional {
					continue
				}
				return nil, nil, fmt.Errorf("configmap %q: %w", src.ConfigMapRef.Name, err)
			}
			for _, k := range sortedKeys(cm.Data) {
				set(src.Prefix+k, cm.Data[k])
			}
		case src.SecretRef != nil:
			s, err := w.a.cs.CoreV1().Secrets(w.namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if src.SecretRef.Optional != nil && *src.SecretRef.Optional {
					continue
				}
				return nil, nil, fmt.Errorf("secret %q: %w", src.SecretRef.Name, err)
			}
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				set(src.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := w.envValueFrom(ctx, c, e.ValueFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, vars, nil
}

func (w *podWorker) envValueFrom(ctx context.Context, c *corev1.Container, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := w.a.cs.CoreV1().Secrets(w.namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, w.namespace, ref.Name)
		}
		return string(v), true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := w.a.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, w.namespace, ref.Name)
		}
		return v, true, nil
	case src.FieldRef != nil:
		v, err := w.fieldValue(src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := w.resourceValue(c, src.ResourceFieldRef)
		return v, err == nil, err
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// fieldValue resolves a downward-API field path of the pod.
func (w *podWorker) fieldValue(path string) (string, error) {
	pod := w.currentPod()
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
	case "status.hostIP", "status.hostIPs":
		return w.a.nodeIP, nil
	case "status.podIP", "status.podIPs":
		return w.ip, nil
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			key := path[len(prefix)+2 : len(path)-2]
			if prefix == "metadata.labels" {
				return pod.Labels[key], nil
			}
			return pod.Annotations[key], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func (w *podWorker) resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		pod := w.currentPod()
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &pod.Spec.Containers[i]
			}
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		if kind == "requests" {
			return "0", nil
		}
		q, ok = w.a.cfg.Capacity[corev1.ResourceName(name)]
		if !ok {
			return "0", nil
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
		return fmt.Sprint(v), nil
	}
	v := (q.Value() + divisor.Value() - 1) / divisor.Value()
	return fmt.Sprint(v), nil
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
