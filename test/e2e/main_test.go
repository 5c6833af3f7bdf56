package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	_ "github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

var (
	r   *rig.Rig
	bin string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "mysqlctl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "mysqlctl")
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/mysqlctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build mysqlctl: %v\n%s", err, out)
		os.Exit(1)
	}
	// The tests marked parallel mostly wait (Lease expiries, restarts, backoffs): four at a
	// time keep two cores busy without starving one (their sum is about 2000 s, the longest
	// 450 s: at three the package took 28 minutes). Set before the flags are parsed, so a
	// -parallel on the command line still wins.
	if err := flag.Set("test.parallel", "4"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// MYSQLCTL_RIG_RESTART_BACKOFF and MYSQLCTL_RIG_MAX_RESTART_BACKOFF shorten the rig kubelet's
	// crash-loop back-off (the kubelet's 10s doubling to 5m by default), for soaks that kill the
	// same pods again and again (BenchmarkKillSoak).
	// Pods of mysqlctl's image (manifests/watch's Deployment) run the binary under test, with
	// their ServiceAccount's token as in a real cluster (TestInClusterWatchFailsOver).
	opts := rig.Options{MysqlctlBinary: bin, ServiceAccountAdmission: true}
	for env, into := range map[string]*time.Duration{"MYSQLCTL_RIG_RESTART_BACKOFF": &opts.RestartBackoff, "MYSQLCTL_RIG_MAX_RESTART_BACKOFF": &opts.MaxRestartBackoff} {
		if v := os.Getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				fmt.Fprintf(os.Stderr, "%s=%q: want a positive duration such as 1s\n", env, v)
				os.Exit(2)
			}
			*into = d
		}
	}
	code := rig.Main(m, &r, opts)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the CLI.
type result struct {
	stdout, stderr string
	code           int
}

// viaPortForwardTests are the tests (with their subtests) whose mysqlctl runs use the default
// dialer, as on a workstation.
var viaPortForwardTests sync.Map

// viaPortForward makes every mysqlctl run of the test and its subtests reach MySQL as a user's
// laptop does: through the API server's pods/portforward and the node's kubelet API (the default
// dialer). Other tests dial the pods' addresses (--dialer direct), as mysqlctl does in the cluster.
func viaPortForward(t *testing.T) {
	viaPortForwardTests.Store(t.Name(), true)
	t.Cleanup(func() { viaPortForwardTests.Delete(t.Name()) })
}

// cliEnv is the environment of a mysqlctl run of the test: its own configuration directory and
// its dialer.
func cliEnv(t *testing.T, extra ...string) []string {
	// A backup's or restore's copy is short here: its progress is looked at 4 times a second
	// (the agent prints a line when the copy begins and when it ends).
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "MYSQLCTL_PROGRESS_EVERY=250ms")
	direct := true
	for name := t.Name(); name != ""; {
		if _, ok := viaPortForwardTests.Load(name); ok {
			direct = false
			break
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	if direct {
		env = append(env, "MYSQLCTL_DIALER=direct")
	}
	return append(env, extra...)
}

// mysqlctl runs the real binary against the rig (dialing the pods directly, or through
// port-forward in the tests that ask for it with viaPortForward).
func mysqlctl(t *testing.T, args ...string) result {
	t.Helper()
	return mysqlctlEnv(t, nil, args...)
}

// mysqlctlEnv runs the real binary with extra environment (which wins over cliEnv's), in the
// namespace default unless the arguments give -n.
func mysqlctlEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", r.Kubeconfig)...)
	if !slices.Contains(args, "-n") {
		cmd.Args = append(cmd.Args, "-n", "default")
	}
	cmd.Env = cliEnv(t, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run mysqlctl %v: %v", args, err)
	}
	return result{out.String(), errOut.String(), code}
}

func kube(t *testing.T) client.Client {
	t.Helper()
	s := clientScheme(t)
	c, err := client.New(r.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getCluster(t *testing.T, ctx context.Context, name string) *v1.MysqlCluster {
	t.Helper()
	return getClusterIn(t, ctx, "default", name)
}

// getClusterIn is getCluster in namespace ns.
func getClusterIn(t *testing.T, ctx context.Context, ns, name string) *v1.MysqlCluster {
	t.Helper()
	c := &v1.MysqlCluster{}
	if err := kube(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// updateSpec changes the cluster's spec, read afresh and written again on a conflict: a watch
// or a command may write the status (which moves the resourceVersion) at any time.
func updateSpec(t *testing.T, ctx context.Context, name string, change func(*v1.MysqlClusterSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		c := getCluster(t, ctx, name)
		change(&c.Spec)
		return kube(t).Update(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func secret(t *testing.T, ctx context.Context, name string) *corev1.Secret {
	t.Helper()
	s, err := r.Client.CoreV1().Secrets("default").Get(ctx, name+"-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// db opens root on a pod (or any address).
func db(t *testing.T, addr, password string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", rig.DSN(addr, "root", password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// eventually polls f until it returns nil or the context ends.
func eventually(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	var last error
	for {
		if last = f(); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deleteCluster removes a cluster and its data (the rig's pods and volumes with it).
func deleteCluster(t *testing.T, name string) {
	t.Helper()
	if res := mysqlctl(t, "delete", name, "--delete-data", "--yes"); res.code != 0 {
		t.Errorf("delete %s: %d %s", name, res.code, res.stderr)
	}
}

// noPasswords fails when any password of the cluster's Secret occurs in the texts.
func noPasswords(t *testing.T, s *corev1.Secret, texts ...string) {
	t.Helper()
	for k, v := range s.Data {
		if !strings.Contains(k, "password") {
			continue // account names are not secret
		}
		for _, txt := range texts {
			if len(v) > 0 && strings.Contains(txt, string(v)) {
				t.Errorf("the %s value leaked into output", k)
			}
		}
	}
}

// elevated runs statements as root on one session with mysqlctl's READ ONLY ADMIN role
// enabled: no account holds that privilege by default, so read_only binds root too. Tests use it
// to do on purpose what read_only now prevents (an errant write on a replica).
func elevated(t *testing.T, ctx context.Context, d *sql.DB, stmts ...string) {
	t.Helper()
	conn, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	for _, q := range append(append([]string{"SET ROLE " + topology.ReadOnlyAdminRole}, stmts...), "SET ROLE NONE") {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
