package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errVolumesPending means a volume cannot be set up yet (an unbound claim); the pod waits.
var errVolumesPending = errors.New("waiting for volumes")

// volumeFiles is the content of a ConfigMap, Secret, downward API or projected volume.
type volumeFiles map[string]fileContent

type fileContent struct {
	data []byte
	mode os.FileMode
}

// prepareVolumes materialises the pod's volumes as host directories and returns them by name.
// Called at pod start and on every resync, so ConfigMap and Secret volumes follow their objects as
// the kubelet's do (files mounted with subPath keep their old content, also as in Kubernetes).
func (w *podWorker) prepareVolumes(ctx context.Context) (map[string]string, error) {
	pod := w.currentPod()
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			// World-writable as the kubelet makes it (whatever the umask): containers of one
			// pod may run as different users.
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
		case v.PersistentVolumeClaim != nil:
			d, err := w.a.claimDir(w.namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				if errors.Is(err, errClaimPending) {
					return nil, fmt.Errorf("%w: persistentvolumeclaim %q is not bound", errVolumesPending, v.PersistentVolumeClaim.ClaimName)
				}
				return nil, err
			}
			dir = d
		case v.HostPath != nil:
			dir = v.HostPath.Path
			if t := v.HostPath.Type; t != nil && *t == corev1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, err
				}
			}
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			files, err := w.volumeFiles(ctx, v)
			if err != nil {
				return nil, err
			}
			if err := syncFiles(dir, files); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("volume %q: only emptyDir, persistentVolumeClaim, hostPath, configMap, secret, downwardAPI and projected volumes run in the rig", v.Name)
		}
		dirs[v.Name] = dir
	}
	return dirs, nil
}

// volumeFiles computes the files of a ConfigMap, Secret, downward API or projected volume.
func (w *podWorker) volumeFiles(ctx context.Context, v corev1.Volume) (volumeFiles, error) {
	files := volumeFiles{}
	mode := func(m *int32, def *int32) os.FileMode {
		switch {
		case m != nil:
			return os.FileMode(*m)
		case def != nil:
			return os.FileMode(*def)
		}
		return 0o644
	}
	addConfigMap := func(name string, items []corev1.KeyToPath, optional *bool, def *int32) error {
		cm, err := w.a.configMap(ctx, w.namespace, name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional != nil && *optional {
				return nil
			}
			return fmt.Errorf("configmap %q: %w", name, err)
		}
		data := map[string][]byte{}
		for k, val := range cm.Data {
			data[k] = []byte(val)
		}
		for k, val := range cm.BinaryData {
			data[k] = val
		}
		return addKeys(files, "configmap "+name, data, items, optional, def, mode)
	}
	addSecret := func(name string, items []corev1.KeyToPath, optional *bool, def *int32) error {
		s, err := w.a.secret(ctx, w.namespace, name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional != nil && *optional {
				return nil
			}
			return fmt.Errorf("secret %q: %w", name, err)
		}
		return addKeys(files, "secret "+name, s.Data, items, optional, def, mode)
	}
	addDownward := func(items []corev1.DownwardAPIVolumeFile, def *int32) error {
		for _, it := range items {
			var val string
			var err error
			switch {
			case it.FieldRef != nil:
				val, err = w.fieldValue(it.FieldRef.FieldPath)
			case it.ResourceFieldRef != nil:
				pod := w.currentPod()
				if len(pod.Spec.Containers) == 0 {
					continue
				}
				val, err = w.resourceValue(&pod.Spec.Containers[0], it.ResourceFieldRef)
			}
			if err != nil {
				return err
			}
			files[it.Path] = fileContent{data: []byte(val), mode: mode(it.Mode, def)}
		}
		return nil
	}
	switch {
	case v.ConfigMap != nil:
		return files, addConfigMap(v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
	case v.Secret != nil:
		return files, addSecret(v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
	case v.DownwardAPI != nil:
		return files, addDownward(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		def := v.Projected.DefaultMode
		for _, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				err = addConfigMap(src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
			case src.Secret != nil:
				err = addSecret(src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
			case src.DownwardAPI != nil:
				err = addDownward(src.DownwardAPI.Items, def)
			case src.ServiceAccountToken != nil:
				var token []byte
				if token, err = w.serviceAccountToken(ctx, src.ServiceAccountToken); err == nil {
					files[src.ServiceAccountToken.Path] = fileContent{data: token, mode: mode(nil, def)}
				}
			}
			// Cluster trust bundles and pod certificates are left out: nothing here uses them.
			if err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

func addKeys(files volumeFiles, what string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, def *int32, mode func(*int32, *int32) os.FileMode) error {
	if len(items) == 0 {
		for k, val := range data {
			files[k] = fileContent{data: val, mode: mode(nil, def)}
		}
		return nil
	}
	for _, it := range items {
		val, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files[it.Path] = fileContent{data: val, mode: mode(it.Mode, def)}
	}
	return nil
}

// syncFiles makes dir hold exactly files; each file is replaced atomically.
func syncFiles(dir string, files volumeFiles) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for rel, fc := range files {
		target := filepath.Join(dir, filepath.Clean("/"+rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if old, err := os.ReadFile(target); err == nil && string(old) == string(fc.data) {
			if st, err := os.Stat(target); err == nil && st.Mode().Perm() == fc.mode.Perm() {
				continue
			}
		}
		tmp := filepath.Join(filepath.Dir(target), ".rig-tmp-"+filepath.Base(target))
		if err := os.WriteFile(tmp, fc.data, fc.mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(tmp, fc.mode.Perm()); err != nil {
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
	}
	// Remove files whose keys are gone.
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if _, ok := files[rel]; !ok {
			return os.Remove(p)
		}
		return nil
	})
}

// containerMounts lists the bind mounts of a container: the image's own directories (for the
// emulated mariadb image) or binary (mysqlctl's), the pod's /etc/hosts and /etc/resolv.conf (hosts.go), then the
// container's volumeMounts. Mount points that do not exist are created: inside another mount when
// one covers them, else on the host (and removed again when the rig stops).
func (w *podWorker) containerMounts(c *corev1.Container, kind emulated, vols map[string]string, vars map[string]string, layer string) ([]mount, error) {
	var mounts []mount
	mounted := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mounted[filepath.Clean(vm.MountPath)] = true
	}
	if kind == imageMariaDB {
		etc := filepath.Join(layer, "etc-mysql")
		if err := w.a.img.podEtc(etc, w.ip); err != nil {
			return nil, err
		}
		mounts = append(mounts,
			mount{src: w.a.img.binDir, dst: imageBinDir, readOnly: true},
			mount{src: etc, dst: imageEtcDir},
		)
		for _, d := range []struct{ name, dst string }{{"run-mysqld", imageRunDir}, {"var-lib-mysql", imageDataDir}} {
			if mounted[d.dst] {
				continue
			}
			src := filepath.Join(layer, d.name)
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, err
			}
			mounts = append(mounts, mount{src: src, dst: d.dst})
		}
	}
	if kind == imageMysqlctl {
		mounts = append(mounts, mount{src: w.a.cfg.MysqlctlBinary, dst: mysqlctlEntrypoint, readOnly: true})
	}
	// Every container has a /tmp of its own, as in its image's layer. A shared host /tmp is not
	// only unfaithful but harmful: a starting mariadbd deletes every #sql* file in its tmpdir
	// (leftovers of its own earlier run, it assumes), which are a running neighbour's temporary
	// tables ("Error on delete of '/tmp/#sql-temptable-...'").
	// It is mounted last, since the pods' own files (hosts, volumes) may lie under the host's /tmp,
	// and not at all when a volume is mounted at or under /tmp.
	privateTmp := ""
	if !mountedUnder(mounted, "/tmp") {
		tmp := filepath.Join(layer, "tmp")
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chmod(tmp, os.ModeSticky|0o777); err != nil {
			return nil, err
		}
		privateTmp = tmp
	}
	mounts = append(mounts,
		mount{src: w.hostsPath(), dst: "/etc/hosts", readOnly: true},
		mount{src: w.resolvConfPath(), dst: "/etc/resolv.conf", readOnly: true},
	)
	for _, vm := range c.VolumeMounts {
		src, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no volume of that name", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, vars)
		}
		if sub != "" {
			src = filepath.Join(src, filepath.Clean("/"+sub))
			if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(src, 0o777); err != nil {
					return nil, err
				}
			}
		}
		mounts = append(mounts, mount{src: src, dst: filepath.Clean(vm.MountPath), readOnly: vm.ReadOnly})
	}
	if privateTmp != "" {
		mounts = append(mounts, mount{src: privateTmp, dst: "/tmp", last: true})
	}
	// The termination message: a file of the container's own at its terminationMessagePath, read
	// when the container exits (terminationMessage).
	term := filepath.Join(layer, terminationFile)
	if err := os.WriteFile(term, nil, 0o666); err != nil {
		return nil, err
	}
	if err := os.Chmod(term, 0o666); err != nil {
		return nil, err
	}
	mounts = append(mounts, mount{src: term, dst: terminationPath(c)})
	for _, m := range mounts {
		if err := w.ensureMountpoint(m, mounts); err != nil {
			return nil, err
		}
	}
	return mounts, nil
}

// ensureMountpoint creates a missing mount point with the type of its source.
func (w *podWorker) ensureMountpoint(m mount, all []mount) error {
	// The deepest other mount that covers m.dst decides where the mount point really lives.
	target := m.dst
	hostSide := true
	best := ""
	for _, o := range all {
		if o.dst != m.dst && strings.HasPrefix(m.dst, o.dst+"/") && len(o.dst) > len(best) {
			best = o.dst
			target = filepath.Join(o.src, strings.TrimPrefix(m.dst, o.dst))
			hostSide = false
		}
	}
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	st, err := os.Stat(m.src)
	if err != nil {
		return fmt.Errorf("mount source %s: %w", m.src, err)
	}
	var created []string
	for p := filepath.Dir(target); hostSide && p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		created = append(created, p)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if st.IsDir() {
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	} else {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_ = f.Close()
	}
	if hostSide {
		for i := len(created) - 1; i >= 0; i-- {
			w.a.addMountpoint(created[i])
		}
		w.a.addMountpoint(target)
		w.a.logf("created mount point %s on the host for %s", target, w.key)
	}
	return nil
}

// configMap reads a ConfigMap from the agent's cache, or from the API server when the cache does
// not hold it yet (created a moment ago). The object is shared: never modify it.
func (a *Agent) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, err := a.configMapLister.ConfigMaps(ns).Get(name); err == nil {
		return cm, nil
	}
	return a.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

// secret reads a Secret as configMap reads a ConfigMap.
func (a *Agent) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	if s, err := a.secretLister.Secrets(ns).Get(name); err == nil {
		return s, nil
	}
	return a.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// podToken is a service account token the worker obtained, and when to ask for a new one.
type podToken struct {
	token   []byte
	refresh time.Time
}

// serviceAccountToken returns a token of the pod's ServiceAccount for a projected volume source,
// obtained with the TokenRequest API and bound to the pod (it stops working once the pod is
// gone), as the kubelet's token manager does; like it, the worker asks for a new token once 80%
// of the old one's lifetime has passed, or after 24 hours.
func (w *podWorker) serviceAccountToken(ctx context.Context, src *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	key := fmt.Sprintf("%s/%d", src.Audience, exp)
	if t, ok := w.tokens[key]; ok && time.Now().Before(t.refresh) {
		return t.token, nil
	}
	pod := w.currentPod()
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	var audiences []string
	if src.Audience != "" {
		audiences = []string{src.Audience}
	}
	issued := time.Now()
	tr, err := w.a.cs.CoreV1().ServiceAccounts(w.namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         audiences,
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of serviceaccount %q: %w", sa, err)
	}
	refresh := issued.Add(tr.Status.ExpirationTimestamp.Sub(issued) * 8 / 10)
	if day := issued.Add(24 * time.Hour); day.Before(refresh) {
		refresh = day
	}
	if w.tokens == nil {
		w.tokens = map[string]podToken{}
	}
	w.tokens[key] = podToken{token: []byte(tr.Status.Token), refresh: refresh}
	return w.tokens[key].token, nil
}

// mountedUnder reports whether a mount's destination is dir or lies under it.
func mountedUnder(mounted map[string]bool, dir string) bool {
	for d := range mounted {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			return true
		}
	}
	return false
}

// terminationFile is a container's termination message file, in its layer directory.
const terminationFile = "termination-log"

// maxTerminationMessage is what the kubelet keeps of a termination message (4096 bytes), and
// logTailForMessage what it takes from the log under FallbackToLogsOnError (80 lines, 2048 bytes).
const (
	maxTerminationMessage = 4096
	logTailForMessage     = 2048
	logLinesForMessage    = 80
)

func terminationPath(c *corev1.Container) string {
	if c.TerminationMessagePath != "" {
		return filepath.Clean(c.TerminationMessagePath)
	}
	return corev1.TerminationMessagePathDefault
}

// terminationMessage is what the kubelet reports of an exited container: its termination
// message file, at most 4096 bytes; when that is empty, the container failed and its policy is
// FallbackToLogsOnError, the tail of its log.
func terminationMessage(c *corev1.Container, layer, logPath string, instance, code int) string {
	b, _ := os.ReadFile(filepath.Join(layer, terminationFile))
	if len(b) > maxTerminationMessage {
		b = b[:maxTerminationMessage]
	}
	if len(b) > 0 || code == 0 || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		return string(b)
	}
	all, _ := os.ReadFile(logPath)
	log, _ := instanceLog(all, instance)
	if len(log) > logTailForMessage {
		log = log[len(log)-logTailForMessage:]
	}
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	if len(lines) > logLinesForMessage {
		lines = lines[len(lines)-logLinesForMessage:]
	}
	return strings.Join(lines, "\n")
}
