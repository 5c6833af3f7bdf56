package e2e

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestForeignGTIDsQuarantined: a replica that wrote a transaction of its own before it joined
// holds GTIDs the primary never produced; it is quarantined (labelled, listed with the GTIDs,
// kept out of the replica Service), never joined, and the cluster says Degraded.
func TestForeignGTIDsQuarantined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	defer deleteCluster(t, "errant")
	killAt(t, ctx, orchestrate.StageJoiningReplicas, "create", "errant", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "4m")

	// An errant write on the replica-to-be, made on purpose through the READ ONLY ADMIN role.
	root := string(secret(t, ctx, "errant").Data[specs.SecretRootPassword])
	addr, err := r.PodAddr(ctx, "default", "errant-1", 3306)
	if err != nil {
		t.Fatal(err)
	}
	elevated(t, ctx, db(t, addr, root), "CREATE DATABASE rogue")
	res := mysqlctl(t, "reconcile", "errant", "--timeout", "3m")
	if res.code != 4 || !strings.Contains(res.stdout, "is Degraded") {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "errant")
	if c.Status.Phase != v1.PhaseDegraded || len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != "errant-1" {
		t.Fatalf("status: phase %s errant %+v", c.Status.Phase, c.Status.ErrantInstances)
	}
	if e := c.Status.ErrantInstances[0]; !strings.Contains(e.Reason, "transactions the primary does not have") || e.ErrantGTIDs == "" {
		t.Errorf("errant record lacks evidence: %+v", e)
	}
	p, err := r.Client.CoreV1().Pods("default").Get(ctx, "errant-1", metav1.GetOptions{})
	if err != nil || p.Labels[specs.LabelRole] != string(v1.RoleQuarantined) {
		t.Errorf("errant-1 role label %q (%v)", p.Labels[specs.LabelRole], err)
	}
	if addrs, _ := r.ServiceAddrs(ctx, "default", "errant-replicas", "mysql"); len(addrs) != 0 {
		t.Errorf("quarantined instance still served by the replica Service: %v", addrs)
	}
	if joined := showsReplication(ctx, t, db(t, addr, root)); joined {
		t.Errorf("errant-1 was joined to replication")
	}
	st := mysqlctl(t, "status", "errant")
	if !strings.Contains(st.stdout, "verdict\tdegraded: ") || !strings.Contains(st.stdout, "quarantined") {
		t.Errorf("status: %q", st.stdout)
	}
}

// TestReplacedVolumeQuarantined: when a replica's data volume is replaced (a different PVC UID
// than the provenance record), the instance is quarantined on the next reconcile, not joined.
func TestReplacedVolumeQuarantined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "vol", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "vol")
	before := getCluster(t, ctx, "vol")
	pvcs := r.Client.CoreV1().PersistentVolumeClaims("default")
	old, err := pvcs.Get(ctx, "data-vol-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pvcs.Delete(ctx, "data-vol-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.CoreV1().Pods("default").Delete(ctx, "vol-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "vol-1 back on a new volume", func() error {
		pvc, err := pvcs.Get(ctx, "data-vol-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pvc.UID == old.UID {
			return errString("old claim still there")
		}
		p, err := r.Client.CoreV1().Pods("default").Get(ctx, "vol-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) {
			return errString("not ready")
		}
		return nil
	})
	res := mysqlctl(t, "reconcile", "vol", "--timeout", "3m")
	if res.code != 4 || !strings.Contains(res.stdout, "is Degraded") {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "vol")
	if len(c.Status.ErrantInstances) != 1 || !strings.Contains(c.Status.ErrantInstances[0].Reason, string(old.UID)) {
		t.Fatalf("errant %+v", c.Status.ErrantInstances)
	}
	if c.Status.Phase != v1.PhaseDegraded {
		t.Errorf("phase %s, want Degraded", c.Status.Phase)
	}
	if len(c.Status.GTIDBootstrap) != 2 || c.Status.GTIDBootstrap[1].PVCUID != before.Status.GTIDBootstrap[1].PVCUID {
		t.Errorf("provenance rewritten: %+v", c.Status.GTIDBootstrap)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// showsReplication reports whether SHOW SLAVE STATUS returns a row (replication configured).
func showsReplication(ctx context.Context, t *testing.T, d *sql.DB) bool {
	t.Helper()
	rows, err := d.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := rows.Next()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}
