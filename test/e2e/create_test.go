package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestCreateThreeInstances: create --wait ends with a real, replicating, semi-synchronous cluster
// whose status tells the truth; data written through the primary Service reaches every replica;
// a second reconcile writes nothing; a recreated replica pod rejoins from its own data.
func TestCreateThreeInstances(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res := mysqlctl(t, "create", "demo", "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "256Mi", "--wait", "--timeout", "5m")
	if res.code != 0 {
		t.Fatalf("create --wait: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	defer deleteCluster(t, "demo")
	if !strings.Contains(res.stdout, "mysqlcluster.mysqlctl.io/demo is Running") {
		t.Errorf("stdout: %q", res.stdout)
	}
	for _, stage := range orchestrate.BootstrapStages {
		if !strings.Contains(res.stderr, "bootstrap "+stage) {
			t.Errorf("no progress line for stage %s in:\n%s", stage, res.stderr)
		}
	}
	c := getCluster(t, ctx, "demo")
	if c.Status.Phase != v1.PhaseRunning || c.Status.CurrentPrimary != "demo-0" || c.Status.Ready != "3/3" || c.Status.Operation != nil {
		t.Fatalf("status: phase %s primary %s ready %s op %+v", c.Status.Phase, c.Status.CurrentPrimary, c.Status.Ready, c.Status.Operation)
	}
	if len(c.Status.GTIDBootstrap) != 3 || len(c.Status.History) != 1 || c.Status.History[0].Result != "Succeeded" {
		t.Errorf("provenance %d records, history %+v", len(c.Status.GTIDBootstrap), c.Status.History)
	}
	for _, rec := range c.Status.GTIDBootstrap {
		pvc, err := r.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, fmt.Sprintf("data-demo-%d", rec.Ordinal), metav1.GetOptions{})
		if err != nil || string(pvc.UID) != rec.PVCUID {
			t.Errorf("record %d names PVC %s, live %v (%v)", rec.Ordinal, rec.PVCUID, pvc, err)
		}
	}
	for i, want := range []string{"primary", "replica", "replica"} {
		p, err := r.Client.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("demo-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[specs.LabelRole]; got != want {
			t.Errorf("demo-%d role label %q, want %q", i, got, want)
		}
	}

	// Write through the primary Service (followed to its endpoints, never a cluster IP).
	sec := secret(t, ctx, "demo")
	root := string(sec.Data[specs.SecretRootPassword])
	addrs, err := r.ServiceAddrs(ctx, "default", "demo-primary", "mysql")
	if err != nil || len(addrs) != 1 {
		t.Fatalf("primary Service endpoints %v: %v", addrs, err)
	}
	primary := db(t, addrs[0], root)
	for _, q := range []string{"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)"} {
		if _, err := primary.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 100; i++ {
		// Each commit returns only after a replica acknowledged it (semi-sync).
		if _, err := primary.ExecContext(ctx, "INSERT INTO app.t VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}
	var yes string
	if err := primary.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='Rpl_semi_sync_master_status'").Scan(&yes); err != nil || yes != "ON" {
		t.Errorf("semi-sync source status %q (%v), want ON", yes, err)
	}
	for _, pod := range []string{"demo-1", "demo-2"} {
		addr, err := r.PodAddr(ctx, "default", pod, 3306)
		if err != nil {
			t.Fatal(err)
		}
		replica := db(t, addr, root)
		eventually(t, ctx, pod+" has every row", func() error {
			var n int
			if err := replica.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.t").Scan(&n); err != nil {
				return err
			}
			if n != 100 {
				return fmt.Errorf("%d rows", n)
			}
			return nil
		})
		var ro int
		if err := replica.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil || ro != 1 {
			t.Errorf("%s read_only=%d (%v)", pod, ro, err)
		}
	}

	// A second reconcile of a converged cluster changes nothing.
	before := resourceVersions(t, ctx)
	again := mysqlctl(t, "reconcile", "demo")
	if again.code != 0 || strings.Contains(again.stdout, "configured") || strings.Contains(again.stdout, "created") {
		t.Errorf("second reconcile: exit %d stdout %q stderr %q", again.code, again.stdout, again.stderr)
	}
	if after := resourceVersions(t, ctx); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("second reconcile wrote:\nbefore %v\nafter  %v", before, after)
	}

	// status tells the truth.
	st := mysqlctl(t, "status", "demo")
	if st.code != 0 || !strings.Contains(st.stdout, "verdict\thealthy: primary demo-0 writable; 2 replica(s) proven replicating") {
		t.Errorf("status: %d %q %q", st.code, st.stdout, st.stderr)
	}
	js := mysqlctl(t, "status", "demo", "-o", "json")
	var fromJSON v1.MysqlCluster
	if err := json.Unmarshal([]byte(js.stdout), &fromJSON); err != nil || fromJSON.Status.CurrentPrimary != "demo-0" {
		t.Errorf("status -o json: %v", err)
	}

	// A replica pod deleted and recreated rejoins from its own data.
	if err := r.Client.CoreV1().Pods("default").Delete(ctx, "demo-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "demo-2 recreated and ready", func() error {
		p, err := r.Client.CoreV1().Pods("default").Get(ctx, "demo-2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	if _, err := primary.ExecContext(ctx, "INSERT INTO app.t VALUES (101)"); err != nil {
		t.Fatal(err)
	}
	rj := mysqlctl(t, "reconcile", "demo", "--timeout", "2m")
	if rj.code != 0 {
		t.Fatalf("reconcile after pod loss: %d %s", rj.code, rj.stderr)
	}
	addr, err := r.PodAddr(ctx, "default", "demo-2", 3306)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "recreated demo-2 caught up", func() error {
		var n int
		if err := db(t, addr, root).QueryRowContext(ctx, "SELECT COUNT(*) FROM app.t").Scan(&n); err != nil {
			return err
		}
		if n != 101 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	c2 := getCluster(t, ctx, "demo")
	if fmt.Sprint(c2.Status.GTIDBootstrap) != fmt.Sprint(c.Status.GTIDBootstrap) {
		t.Errorf("provenance rewritten:\nbefore %v\nafter  %v", c.Status.GTIDBootstrap, c2.Status.GTIDBootstrap)
	}

	// No password anywhere: outputs, status, events.
	evs, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evJSON, _ := json.Marshal(evs)
	stJSON, _ := json.Marshal(c2)
	noPasswords(t, sec, res.stdout, res.stderr, again.stdout, again.stderr, st.stdout, js.stdout, rj.stdout, rj.stderr, string(evJSON), string(stJSON))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func resourceVersions(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	cs := r.Client
	if o, err := cs.AppsV1().StatefulSets("default").Get(ctx, "demo", metav1.GetOptions{}); err == nil {
		out["sts"] = o.ResourceVersion
	}
	if l, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: specs.LabelInstance + "=demo"}); err == nil {
		for _, o := range l.Items {
			out["cm/"+o.Name] = o.ResourceVersion
		}
	}
	for _, s := range []string{"demo-instances", "demo-primary", "demo-replicas"} {
		if o, err := cs.CoreV1().Services("default").Get(ctx, s, metav1.GetOptions{}); err == nil {
			out[s] = o.ResourceVersion
		}
	}
	if o, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "demo", metav1.GetOptions{}); err == nil {
		out["pdb"] = o.ResourceVersion
	}
	if o, err := cs.CoreV1().Secrets("default").Get(ctx, "demo-credentials", metav1.GetOptions{}); err == nil {
		out["secret"] = o.ResourceVersion
	}
	return out
}

// TestCreateOneInstance: a single instance runs without replicas or semi-sync.
func TestCreateOneInstance(t *testing.T) {
	res := mysqlctl(t, "create", "solo", "--image", "mariadb:10.11", "--replicas", "1", "--storage-size", "256Mi", "--wait", "--timeout", "3m")
	if res.code != 0 {
		t.Fatalf("create --wait: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, "solo")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := getCluster(t, ctx, "solo")
	if c.Status.Phase != v1.PhaseRunning || c.Status.Ready != "1/1" || c.Status.CurrentPrimary != "solo-0" {
		t.Errorf("status %+v", c.Status)
	}
}

// TestBootstrapResumesAfterKillAtEveryStage SIGKILLs the CLI while it holds at each bootstrap
// stage, then runs reconcile: it must finish from the recorded stage, and provenance recorded
// before the kill must be unchanged.
func TestBootstrapResumesAfterKillAtEveryStage(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	for i, stage := range orchestrate.BootstrapStages {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			name := fmt.Sprintf("kill%d", i)
			cmd := exec.CommandContext(ctx, bin, "create", name, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi",
				"--wait", "--timeout", "4m", "--kubeconfig", r.Kubeconfig, "-n", "default")
			cmd.Env = cliEnv(t, "MYSQLCTL_FAILPOINT_PAUSE_AT_STAGE="+stage)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer deleteCluster(t, name)
			paused := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stderr)
				var seen []string
				for sc.Scan() {
					seen = append(seen, sc.Text())
					if strings.Contains(sc.Text(), "failpoint: paused at stage "+stage) {
						paused <- ""
					}
				}
				paused <- strings.Join(seen, "\n")
			}()
			if out := <-paused; out != "" {
				_ = cmd.Wait()
				t.Fatalf("the CLI ended before reaching stage %s:\n%s", stage, out)
			}
			before := getCluster(t, ctx, name)
			if before.Status.Operation == nil || before.Status.Operation.Stage != stage {
				t.Fatalf("recorded operation %+v, want stage %s", before.Status.Operation, stage)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			res := mysqlctl(t, "reconcile", name, "--timeout", "3m")
			if res.code != 0 {
				t.Fatalf("reconcile after kill at %s: exit %d\n%s", stage, res.code, res.stderr)
			}
			after := getCluster(t, ctx, name)
			if after.Status.Phase != v1.PhaseRunning || after.Status.Ready != "2/2" {
				t.Fatalf("after resume: phase %s ready %s", after.Status.Phase, after.Status.Ready)
			}
			if !strings.Contains(res.stderr, "bootstrap "+stage) {
				t.Errorf("resume did not start at the recorded stage %s:\n%s", stage, res.stderr)
			}
			for _, rec := range before.Status.GTIDBootstrap {
				found := false
				for _, a := range after.Status.GTIDBootstrap {
					if a.Ordinal == rec.Ordinal {
						found = true
						if a.PVCUID != rec.PVCUID || a.BootstrapGTIDSet != rec.BootstrapGTIDSet || !a.RecordedAt.Equal(&rec.RecordedAt) {
							t.Errorf("provenance of ordinal %d rewritten: %+v → %+v", rec.Ordinal, rec, a)
						}
					}
				}
				if !found {
					t.Errorf("provenance of ordinal %d lost", rec.Ordinal)
				}
			}
			if len(after.Status.GTIDBootstrap) != 2 {
				t.Errorf("%d provenance records, want 2", len(after.Status.GTIDBootstrap))
			}
		})
	}
}
