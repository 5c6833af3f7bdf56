package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stsPod is a StatefulSet pod as the controller makes it: hostname = name, subdomain = serviceName.
func stsPod(ns, name, subdomain string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "demo"}},
		Spec:       corev1.PodSpec{Hostname: name, Subdomain: subdomain},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func service(ns, name string, headless, publishNotReady bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "demo"}, PublishNotReadyAddresses: publishNotReady},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// hostLines maps each address of a hosts file to its names, in order.
func hostLines(content string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		out[f[0]] = append(out[f[0]], f[1:]...)
	}
	return out
}

func TestHostsContent(t *testing.T) {
	svcs := []*corev1.Service{
		service("db", "demo", true, false),
		service("db", "demo-primary", false, false),
		service("pub", "demo", true, true),
		service("other", "demo", false, false), // not headless: no hostname records
	}
	pods := []podAddr{
		{stsPod("db", "demo-0", "demo", true), "127.0.1.2"},
		{stsPod("db", "demo-1", "demo", true), "127.0.1.3"},
		{stsPod("db", "demo-2", "demo", false), "127.0.1.4"},   // not Ready, not published
		{stsPod("db", "demo-3", "missing", true), "127.0.1.5"}, // no governing Service
		{stsPod("pub", "demo-0", "demo", false), "127.0.1.6"},  // not Ready, but published
		{stsPod("other", "demo-0", "demo", true), "127.0.1.7"},
		{stsPod("db", "demo-9", "demo", true), "10.1.2.3"}, // never written: not loopback
	}
	got := string(hostsContent(pods[1], "demo-1", pods, svcs))
	lines := hostLines(got)
	for _, want := range []string{
		"127.0.0.1\tlocalhost\n",
		"127.0.1.3\tdemo-1.demo.db.svc.cluster.local demo-1\n", // the kubelet's own line
		"127.0.1.2\tdemo-0.demo.db.svc.cluster.local demo-0.demo.db.svc demo-0.demo.db demo-0.demo 127-0-1-2.db.pod.cluster.local 127-0-1-2.db.pod\n",
		"127.0.1.4\t127-0-1-4.db.pod.cluster.local 127-0-1-4.db.pod\n",
		"127.0.1.5\t127-0-1-5.db.pod.cluster.local 127-0-1-5.db.pod\n",
		"127.0.1.6\tdemo-0.demo.pub.svc.cluster.local demo-0.demo.pub.svc demo-0.demo.pub 127-0-1-6.pub.pod.cluster.local 127-0-1-6.pub.pod\n",
		"127.0.1.7\t127-0-1-7.other.pod.cluster.local 127-0-1-7.other.pod\n",
		"127.0.1.2\tdemo-primary.db.svc.cluster.local demo-primary.db.svc demo-primary.db demo-primary\n",
		"127.0.1.3\tdemo-primary.db.svc.cluster.local demo-primary.db.svc demo-primary.db demo-primary\n",
		"127.0.1.6\tdemo.pub.svc.cluster.local demo.pub.svc demo.pub\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "demo-2.demo") || strings.Contains(got, "demo-3.missing") {
		t.Errorf("a pod its headless Service does not publish has a hostname record:\n%s", got)
	}
	if strings.Contains(got, "127.0.1.4\tdemo.db.svc") || strings.Contains(got, "127.0.1.4\tdemo-primary") {
		t.Errorf("a not-ready pod is among a Service's addresses:\n%s", got)
	}
	for ip := range lines {
		if !isLoopback(ip) {
			t.Errorf("non-loopback address %s written:\n%s", ip, got)
		}
	}
	// A pod in another namespace gets no short forms relative to its own namespace.
	if other := string(hostsContent(pods[5], "demo-0", pods, svcs)); strings.Contains(other, " demo-primary\n") || strings.Contains(other, " demo-0.demo\n") {
		t.Errorf("a pod in another namespace must not get the short names of namespace db:\n%s", other)
	}
	// Deleting the pod (terminating) unpublishes it where not-ready addresses are not published.
	gone := stsPod("db", "demo-0", "demo", true)
	gone.DeletionTimestamp = &metav1.Time{}
	pods[0].pod = gone
	if got := string(hostsContent(pods[1], "demo-1", pods, svcs)); strings.Contains(got, "demo-0.demo.db.svc") {
		t.Errorf("a terminating pod keeps its hostname record:\n%s", got)
	}
}

func TestPodFQDN(t *testing.T) {
	svcs := []*corev1.Service{service("db", "demo", true, false)}
	if got := podFQDN(stsPod("db", "demo-0", "demo", false), "127.0.1.2", svcs); got != "demo-0.demo.db.svc.cluster.local" {
		t.Errorf("governed pod: %s", got)
	}
	if got := podFQDN(stsPod("db", "demo-0", "nope", false), "127.0.1.2", svcs); got != "127-0-1-2.db.pod.cluster.local" {
		t.Errorf("ungoverned pod: %s", got)
	}
}

func TestResolvConf(t *testing.T) {
	got := string(resolvConf("db", "127.0.7.1"))
	for _, want := range []string{"search db.svc.cluster.local svc.cluster.local cluster.local\n", "nameserver 127.0.7.1\n", "options ndots:5"} {
		if !strings.Contains(got, want) {
			t.Errorf("resolv.conf lacks %q:\n%s", want, got)
		}
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func TestWriteInPlaceKeepsTheInode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	long := "127.0.0.1\tlocalhost\n127.0.1.2\ta-very-long-name.demo.db.svc.cluster.local\n127.0.1.3\tb\n"
	if err := writeInPlace(path, []byte(long)); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, path)
	// An open descriptor stands for the bind mount: it must see every later content.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, content := range []string{
		"127.0.0.1\tlocalhost\n127.0.1.4\tb\n", // shorter
		"127.0.0.1\tlocalhost\n127.0.1.4\tb",   // shorter by one more byte, no final newline
		long + "127.0.1.5\tc\n",                // longer
		"x\n",
	} {
		if err := writeInPlace(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		want := content
		if !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		buf := make([]byte, 4096)
		n, _ := f.ReadAt(buf, 0)
		if string(buf[:n]) != want {
			t.Errorf("through the open file: %q, want %q", buf[:n], want)
		}
		if inode(t, path) != ino {
			t.Fatal("the file was replaced: a bind mount would keep the old one")
		}
	}
}

func TestPadTo(t *testing.T) {
	for _, tc := range []struct {
		size int
		want string
	}{
		{1, "a\n"}, {2, "a\n"}, {3, "a\n\n"}, {4, "a\n#\n"}, {8, "a\n#    \n"},
	} {
		if got := string(padTo([]byte("a\n"), tc.size)); got != tc.want {
			t.Errorf("padTo(%d) = %q, want %q", tc.size, got, tc.want)
		}
	}
}
