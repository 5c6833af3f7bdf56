package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)y$(B)z", "x1ytwoz"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$A", "$A"},
		{"cost: $", "cost: $"},
		{"$(unclosed", "$(unclosed"},
	} {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClassifyImage(t *testing.T) {
	for _, tc := range []struct {
		image   string
		command []string
		want    emulated
		wantErr bool
	}{
		{"mariadb:10.11", nil, imageMariaDB, false},
		{"docker.io/library/mariadb:11.4@sha256:abc", nil, imageMariaDB, false},
		{"registry.local:5000/mirror/mariadb", []string{"sh"}, imageMariaDB, false},
		{"busybox:1.36", []string{"sh", "-c", "true"}, imageHostCommand, false},
		{"busybox:1.36", nil, 0, true},
		{"mysql:8.4", nil, 0, true},
		{"mysqlctl:latest", nil, imageMysqlctl, false},
		{"registry.example/team/mysqlctl:v1.2@sha256:abc", []string{"/mysqlctl"}, imageMysqlctl, false},
	} {
		got, err := classifyImage(tc.image, tc.command)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("classifyImage(%q, %q) = %v, %v; want %v, error %v", tc.image, tc.command, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestServerArgv(t *testing.T) {
	const ip = "127.0.1.7"
	for _, tc := range []struct{ in, want []string }{
		{[]string{"docker-entrypoint.sh", "mariadbd"}, []string{"docker-entrypoint.sh", "mariadbd", "--bind-address=" + ip}},
		{[]string{"docker-entrypoint.sh", "--log-bin"}, []string{"docker-entrypoint.sh", "--log-bin", "--bind-address=" + ip}},
		{[]string{"/usr/sbin/mysqld", "--bind-address=0.0.0.0"}, []string{"/usr/sbin/mysqld", "--bind-address=0.0.0.0", "--bind-address=" + ip}},
		{[]string{"sh", "-c", "exec mariadbd"}, []string{"sh", "-c", "exec mariadbd"}},
	} {
		if got := serverArgv(tc.in, ip); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("serverArgv(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMysqlctlArgv(t *testing.T) {
	const ip = "127.0.1.7"
	for _, tc := range []struct{ in, want []string }{
		{[]string{"/mysqlctl", "watch", "-A", "--metrics-addr=:9090"}, []string{"/mysqlctl", "watch", "-A", "--metrics-addr=" + ip + ":9090"}},
		{[]string{"/mysqlctl", "watch", "--metrics-addr", "0.0.0.0:9090"}, []string{"/mysqlctl", "watch", "--metrics-addr", ip + ":9090"}},
		{[]string{"/mysqlctl", "watch", "--metrics-addr=[::]:9090"}, []string{"/mysqlctl", "watch", "--metrics-addr=" + ip + ":9090"}},
		{[]string{"/mysqlctl", "watch", "--metrics-addr=127.0.0.1:9090"}, []string{"/mysqlctl", "watch", "--metrics-addr=127.0.0.1:9090"}},
		{[]string{"/mysqlctl", "version"}, []string{"/mysqlctl", "version"}},
	} {
		if got := mysqlctlArgv(tc.in, ip); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("mysqlctlArgv(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRunAs(t *testing.T) {
	pod := func(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext) (*corev1.Pod, *corev1.Container) {
		p := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: psc, Containers: []corev1.Container{{Name: "watch", SecurityContext: csc}}}}
		return p, &p.Spec.Containers[0]
	}
	for _, tc := range []struct {
		name    string
		psc     *corev1.PodSecurityContext
		csc     *corev1.SecurityContext
		want    identity
		wantErr bool
	}{
		{"the image's user", nil, nil, identity{uid: 65532, gid: 65532}, false},
		{"the pod's", &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(2000))}, nil, identity{uid: 1000, gid: 2000}, false},
		{"the container's wins", &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000))}, &corev1.SecurityContext{RunAsUser: ptr.To(int64(7)), AllowPrivilegeEscalation: ptr.To(false)}, identity{uid: 7, gid: 65532, noNewPrivs: true}, false},
		{"root refused", &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, &corev1.SecurityContext{RunAsUser: ptr.To(int64(0))}, identity{}, true},
	} {
		got, err := runAs(pod(tc.psc, tc.csc))
		if (err != nil) != tc.wantErr || (err == nil && *got != tc.want) {
			t.Errorf("%s: runAs = %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	s := setupScript(processSpec{user: &identity{uid: 65532, gid: 65532, noNewPrivs: true}})
	if want := `exec setpriv --reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"`; !strings.Contains(s, want) {
		t.Errorf("script lacks %q:\n%s", want, s)
	}
}

func TestSetupScriptMountsParentsFirstAndQuotes(t *testing.T) {
	s := setupScript(processSpec{
		hostname: "db-0",
		cgroup:   "/sys/fs/cgroup/x",
		workDir:  "/it's here",
		mounts: []mount{
			{src: "/h/conf", dst: "/etc/mysql/conf.d", readOnly: true},
			{src: "/tmp/pod/tmp", dst: "/tmp", last: true},
			{src: "/h/etc", dst: "/etc/mysql"},
		},
	})
	parent := strings.Index(s, "mount --bind '/h/etc' '/etc/mysql'\n")
	child := strings.Index(s, "mount --bind '/h/conf' '/etc/mysql/conf.d'\n")
	if parent < 0 || child < 0 || parent > child {
		t.Errorf("the parent mount must come first:\n%s", s)
	}
	// The private /tmp hides the host's, where other mounts' sources may lie: it comes last.
	if tmp := strings.Index(s, "mount --bind '/tmp/pod/tmp' '/tmp'\n"); tmp < child {
		t.Errorf("the mount marked last must come after every other:\n%s", s)
	}
	for _, want := range []string{
		"mount -o remount,bind,ro '/etc/mysql/conf.d'\n",
		"hostname 'db-0'\n",
		`cd '/it'\''s here'` + "\n",
		"echo $$ > '/sys/fs/cgroup/x/cgroup.procs'",
		`exec "$@"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
}

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Name: "db", Ports: []corev1.ContainerPort{{Name: "mysql", ContainerPort: 3307}}}
	for _, tc := range []struct {
		port intstr.IntOrString
		want int
		err  bool
	}{
		{intstr.FromInt32(3306), 3306, false},
		{intstr.FromString("mysql"), 3307, false},
		{intstr.FromString("http"), 0, true},
	} {
		got, err := resolvePort(tc.port, c)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("resolvePort(%v) = %d, %v", tc.port, got, err)
		}
	}
}

func TestSyncFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syncFiles(dir, volumeFiles{"a.cnf": {data: []byte("one"), mode: 0o644}, "sub/b": {data: []byte("two"), mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	if err := syncFiles(dir, volumeFiles{"a.cnf": {data: []byte("three"), mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.cnf")); string(b) != "three" {
		t.Errorf("a.cnf = %q, want the updated content", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "b")); !os.IsNotExist(err) {
		t.Errorf("a file whose key is gone was kept: %v", err)
	}
}

// worker builds a podWorker with the given containers, without an API server.
func worker(cs ...*ctr) *podWorker {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}
	return &podWorker{
		a:          &Agent{nodeIP: "127.0.1.1", img: &image{version: "10.11"}},
		pod:        pod,
		ip:         "127.0.1.2",
		sandbox:    true,
		containers: cs,
	}
}

func container(name string, init bool) *ctr {
	return &ctr{spec: corev1.Container{Name: name, Image: "mariadb:10.11"}, init: init, answered: new(atomic.Bool)}
}

func condition(st *corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func TestBuildStatus(t *testing.T) {
	now := time.Now()
	done := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
	crashed := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}

	initDone := container("init", true)
	initDone.terminated, initDone.instance = done, 1

	running := container("db", false)
	running.running, running.started, running.startedAt, running.instance = true, true, now, 1
	running.spec.ReadinessProbe = &corev1.Probe{}

	ready := container("db", false)
	ready.running, ready.started, ready.ready, ready.startedAt, ready.instance = true, true, true, now, 1
	ready.spec.ReadinessProbe = &corev1.Probe{}

	backoff := container("db", false)
	backoff.lastTerminated, backoff.restartCount, backoff.instance = crashed, 2, 3
	backoff.waitingReason = "CrashLoopBackOff"

	initRunning := container("init", true)
	initRunning.running, initRunning.instance = true, 1

	for _, tc := range []struct {
		name      string
		w         *podWorker
		phase     corev1.PodPhase
		ready     corev1.ConditionStatus
		initd     corev1.ConditionStatus
		waitingDB string
	}{
		{"init running", worker(initRunning, container("db", false)), corev1.PodPending, corev1.ConditionFalse, corev1.ConditionFalse, "PodInitializing"},
		{"running, probe not passed", worker(initDone, running), corev1.PodRunning, corev1.ConditionFalse, corev1.ConditionTrue, ""},
		{"running and ready", worker(initDone, ready), corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionTrue, ""},
		{"crash loop", worker(initDone, backoff), corev1.PodRunning, corev1.ConditionFalse, corev1.ConditionTrue, "CrashLoopBackOff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.w.buildStatus(&corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}})
			if st.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tc.phase)
			}
			if got := condition(st, corev1.PodReady); got != tc.ready {
				t.Errorf("Ready = %s, want %s", got, tc.ready)
			}
			if got := condition(st, corev1.PodInitialized); got != tc.initd {
				t.Errorf("Initialized = %s, want %s", got, tc.initd)
			}
			if got := condition(st, corev1.PodScheduled); got != corev1.ConditionTrue {
				t.Errorf("the scheduler's PodScheduled condition was not kept: %s", got)
			}
			if st.PodIP != "127.0.1.2" || st.HostIP != "127.0.1.1" {
				t.Errorf("podIP %q hostIP %q", st.PodIP, st.HostIP)
			}
			db := st.ContainerStatuses[0]
			if w := db.State.Waiting; (w == nil) != (tc.waitingDB == "") || (w != nil && w.Reason != tc.waitingDB) {
				t.Errorf("db state = %+v, want waiting %q", db.State, tc.waitingDB)
			}
		})
	}
	// A second build from the written status changes nothing (no status write loops).
	w := worker(initDone, ready)
	first := w.buildStatus(&corev1.PodStatus{})
	if second := w.buildStatus(first); !reflect.DeepEqual(first.Conditions, second.Conditions) {
		t.Errorf("conditions changed on a rebuild:\n%+v\n%+v", first.Conditions, second.Conditions)
	}
}

func TestBuildStatusOfDeletedPod(t *testing.T) {
	for _, tc := range []struct {
		code int32
		want corev1.PodPhase
	}{{0, corev1.PodSucceeded}, {137, corev1.PodFailed}} {
		db := container("db", false)
		db.terminated, db.instance = &corev1.ContainerStateTerminated{ExitCode: tc.code}, 1
		w := worker(db)
		w.terminating = true
		if st := w.buildStatus(&corev1.PodStatus{}); st.Phase != tc.want {
			t.Errorf("deleted pod whose container exited %d: phase %s, want %s", tc.code, st.Phase, tc.want)
		}
	}
}

func TestReportedVersion(t *testing.T) {
	for ref, want := range map[string]string{
		"mariadb:10.11":                            "",
		"mariadb:10.11.19":                         "",
		"mariadb:10.11.6":                          "10.11.6-MariaDB-rig",
		"mariadb:11.4":                             "11.4.0-MariaDB-rig",
		"docker.io/library/mariadb:11.4.2-noble":   "11.4.2-MariaDB-rig",
		"mariadb:10.6@sha256:abc":                  "10.6.0-MariaDB-rig",
		"mariadb":                                  "",
		"mariadb:latest":                           "",
		"registry.local:5000/mariadb":              "",
		"registry.local:5000/library/mariadb:11.8": "11.8.0-MariaDB-rig",
	} {
		if got := reportedVersion(ref, "10.11.19-MariaDB-0+deb12u1"); got != want {
			t.Errorf("reportedVersion(%q) = %q, want %q", ref, got, want)
		}
	}
}
