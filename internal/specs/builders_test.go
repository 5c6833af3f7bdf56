package specs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

func TestRenderMyCnfPerFlavor(t *testing.T) {
	tests := []struct {
		name      string
		cluster   *v1.MysqlCluster
		want      []string
		forbidden []string
	}{
		{
			name:    "mariadb",
			cluster: testenv.Cluster(),
			want: []string{
				"[mysqld]\n", "log_bin = mysql-bin\n", "log_slave_updates = ON\n", "gtid_strict_mode = ON\n",
				"read_only = ON\n", "sync_binlog = 1\n", "innodb_flush_log_at_trx_commit = 1\n", "skip_slave_start = ON\n",
				"rpl_semi_sync_master_wait_point = AFTER_SYNC\n", "rpl_semi_sync_master_timeout = 86400000\n",
			},
			// init_rpl_role=SLAVE would roll back acknowledged commits at crash recovery.
			forbidden: []string{"gtid_mode", "super_read_only", "rpl_semi_sync_source", "init_rpl_role"},
		},
		{
			name:    "mysql",
			cluster: testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Image = "mysql:8.4" }),
			want: []string{
				"gtid_mode = ON\n", "enforce_gtid_consistency = ON\n", "super_read_only = ON\n", "read_only = ON\n",
				"loose_log_replica_updates = ON\n", "loose_skip_replica_start = ON\n", "loose_rpl_semi_sync_source_wait_point = AFTER_SYNC\n",
			},
			forbidden: []string{"gtid_strict_mode", "gtid_domain_id", "\nrpl_semi_sync_master_enabled", "init_rpl_role"},
		},
		{
			name: "user config appended in key order, semi-sync timeout honoured",
			cluster: testenv.Cluster(func(c *v1.MysqlCluster) {
				c.Spec.MysqlConfig = map[string]string{"max_connections": "500", "innodb_buffer_pool_size": "1G"}
				c.Spec.SemiSync.Timeout = &metav1.Duration{Duration: 90e9}
			}),
			want: []string{"rpl_semi_sync_master_timeout = 90000\n", "innodb_buffer_pool_size = 1G\nmax_connections = 500\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderMyCnf(tt.cluster)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, f := range tt.forbidden {
				if strings.Contains(got, f) {
					t.Errorf("unexpected %q in\n%s", f, got)
				}
			}
		})
	}
}

func TestRenderMyCnfRefusesOwnedAndMultilineKeys(t *testing.T) {
	for cfg, want := range map[string]map[string]string{
		"loose_read_only, server-id, skip-log-bin": {"server-id": "9", "loose_read_only": "OFF", "skip-log-bin": "1", "max_connections": "10"},
		"single-line": {"init_connect": "SET x=1\n[client]"},
	} {
		_, err := RenderMyCnf(testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.MysqlConfig = want }))
		if err == nil || !strings.Contains(err.Error(), cfg) {
			t.Errorf("%v: got %v, want an error naming %q", want, err, cfg)
		}
	}
}

func TestBuildStatefulSet(t *testing.T) {
	c := testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Storage.StorageClassName = ptr.To("rig") })
	sts, err := BuildStatefulSet(c)
	if err != nil {
		t.Fatal(err)
	}
	s := sts.Spec
	// Parallel: recreating any pod (the primary's included) never waits for a lower ordinal.
	if *s.Replicas != 3 || s.ServiceName != "demo-instances" || s.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("replicas/serviceName/policy: %d %s %s", *s.Replicas, s.ServiceName, s.PodManagementPolicy)
	}
	if p := s.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 3 {
		t.Errorf("partition %v, want 3 (no pod rolls by itself)", p)
	}
	if s.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Error("PVCs must be retained when the StatefulSet is deleted")
	}
	if len(sts.OwnerReferences) != 1 || sts.OwnerReferences[0].UID != "uid-1" || !*sts.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", sts.OwnerReferences)
	}
	vct := s.VolumeClaimTemplates[0]
	if q := vct.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || *vct.Spec.StorageClassName != "rig" {
		t.Errorf("volume claim %s %v", q.String(), vct.Spec.StorageClassName)
	}
	pod := s.Template.Spec
	ctr := pod.Containers[0]
	if ctr.Image != "mariadb:10.11" || ctr.Ports[0].ContainerPort != 3306 {
		t.Errorf("container %s %v", ctr.Image, ctr.Ports)
	}
	env := ctr.Env[0]
	if env.Name != "MARIADB_ROOT_PASSWORD" || env.ValueFrom.SecretKeyRef.Name != "demo-credentials" || env.ValueFrom.SecretKeyRef.Key != SecretRootPassword {
		t.Errorf("root password env %+v", env)
	}
	probe := strings.Join(ctr.ReadinessProbe.Exec.Command, " ")
	if !strings.Contains(probe, `MYSQL_PWD="$MARIADB_ROOT_PASSWORD" exec mariadb --protocol=socket -uroot`) || strings.Contains(probe, " -p") || strings.Contains(probe, "--password") {
		t.Errorf("readiness probe must run SQL over the socket without a password argument: %s", probe)
	}
	// Run it (sh and the real client) against real servers: Ready only for a server with
	// networking on, never for one run as the entrypoint's temporary init server, nor with a
	// wrong password. The client is told which socket to use: the machine's option files name
	// their own, which the MYSQL_UNIX_PORT default would not override.
	client, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mariadb"), []byte("#!/bin/sh\nexec "+client+" \"$@\" --socket=\"$TEST_SOCKET\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	serving := mariadbtest.Start(t, mariadbtest.Options{Name: "serving"})
	initServer := mariadbtest.Start(t, mariadbtest.Options{Name: "init", SkipNetworking: true})
	for _, tc := range []struct {
		what     string
		srv      *mariadbtest.Server
		password string
		ready    bool
	}{
		{"a server with networking on", serving, mariadbtest.RootPassword, true},
		{"a server with skip_networking", initServer, mariadbtest.RootPassword, false},
		{"a wrong password", serving, "wrong", false},
	} {
		cmd := exec.Command(ctr.ReadinessProbe.Exec.Command[0], ctr.ReadinessProbe.Exec.Command[1:]...)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "MARIADB_ROOT_PASSWORD=" + tc.password, "TEST_SOCKET=" + tc.srv.Socket()}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.ready {
			t.Errorf("readiness against %s: err %v, want ready %v\n%s", tc.what, err, tc.ready, out)
		}
		if strings.Contains(string(out), mariadbtest.RootPassword) {
			t.Errorf("readiness printed the password: %s", out)
		}
	}
	// Started is the server's port open (the temporary init server has networking off), probed
	// by a connect every second, so readiness (an exec every 10 s) begins as soon as it can pass.
	if sp := ctr.StartupProbe; sp == nil || sp.TCPSocket == nil || sp.TCPSocket.Port.StrVal != ctr.Ports[0].Name || sp.PeriodSeconds != 1 ||
		time.Duration(sp.PeriodSeconds*sp.FailureThreshold)*time.Second < time.Hour {
		t.Errorf("startup probe %+v: want a TCP connect to port %q every second, allowing an hour", sp, ctr.Ports[0].Name)
	}
	lp := ctr.LivenessProbe
	if lp.InitialDelaySeconds != 0 {
		t.Errorf("liveness waits %d s on top of the startup probe", lp.InitialDelaySeconds)
	}
	// Alive is a ping over the socket, run directly (no shell, no password), and a busy server
	// is restarted only after at least a minute without an answer: the shortest such stall is
	// the failed probes after the last good one but the first, plus the last one's timeout.
	if got := strings.Join(lp.Exec.Command, " "); got != "mariadb-admin --protocol=socket ping" {
		t.Errorf("liveness probe %q, want the admin client's ping run directly", got)
	}
	if d := time.Duration((lp.FailureThreshold-1)*lp.PeriodSeconds+lp.TimeoutSeconds) * time.Second; d < time.Minute {
		t.Errorf("liveness restarts a server that answered no ping for %s, want at least a minute", d)
	}
	// The exec probes' cost on a node: a container exec each, at most 9 per pod per minute.
	if n := 60/ctr.ReadinessProbe.PeriodSeconds + 60/lp.PeriodSeconds; n > 9 {
		t.Errorf("exec probes %d times a minute per pod (readiness every %d s, liveness every %d s), want at most 9",
			n, ctr.ReadinessProbe.PeriodSeconds, lp.PeriodSeconds)
	}
	script := pod.InitContainers[0].Command[2]
	for _, w := range []string{`ordinal="${HOSTNAME##*-}"`, "$((1000 + ordinal))", "/mnt/mysqlctl-config/mysqlctl.cnf /etc/mysql/conf.d/mysqlctl.cnf"} {
		if !strings.Contains(script, w) {
			t.Errorf("init script lacks %q:\n%s", w, script)
		}
	}
	// With Parallel pods start in any order: the init script must depend on nothing but the pod's
	// own hostname and volumes (no peer, no earlier ordinal).
	for _, f := range []string{"nslookup", "getent", "mysql ", "mariadb ", "-0.", "ncat", "wget", "curl"} {
		if strings.Contains(script, f) {
			t.Errorf("init script refers to %q, which would make it depend on another pod:\n%s", f, script)
		}
	}
	if pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
		t.Error("anti-affinity must prefer spreading across nodes")
	}
	if sts.Spec.Template.Annotations[AnnotationConfigHash] == "" {
		t.Error("config hash annotation missing")
	}

	// MySQL images use their own variable and client names.
	my, err := BuildStatefulSet(testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Image = "mysql:8.4" }))
	if err != nil {
		t.Fatal(err)
	}
	if n := my.Spec.Template.Spec.Containers[0].Env[0].Name; n != "MYSQL_ROOT_PASSWORD" {
		t.Errorf("mysql root password env %s", n)
	}
	// An upgrade in progress drives the partition, for the template it rolls out only: a
	// template changed meanwhile restarts nothing (partition = replicas) until the upgrade
	// adopts it.
	hash, err := TemplateHash(testenv.Cluster())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		image, hash string
		want        int32
	}{{"", hash, 1}, {"mariadb:11.8", hash, 3}, {"", "", 3}} {
		up, _ := BuildStatefulSet(testenv.Cluster(func(cl *v1.MysqlCluster) {
			if c.image != "" {
				cl.Spec.Image = c.image
			}
			cl.Status.Upgrade = &v1.UpgradeStatus{Barrier: v1.UpgradeTemplateReady, Partition: ptr.To[int32](1), TemplateHash: c.hash}
		}))
		if got := *up.Spec.UpdateStrategy.RollingUpdate.Partition; got != c.want {
			t.Errorf("image %q, recorded hash %q: partition %d, want %d", c.image, c.hash, got, c.want)
		}
	}
	// The config hash follows my.cnf and nothing else.
	other, _ := BuildStatefulSet(testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.MysqlConfig = map[string]string{"max_connections": "9"} }))
	same, _ := BuildStatefulSet(testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Replicas = 5 }))
	h := sts.Spec.Template.Annotations[AnnotationConfigHash]
	if other.Spec.Template.Annotations[AnnotationConfigHash] == h || same.Spec.Template.Annotations[AnnotationConfigHash] != h {
		t.Error("config hash must change with my.cnf only")
	}
}

func TestServices(t *testing.T) {
	c := testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.PrimaryService = "writer" })
	h, p, r := BuildHeadlessService(c), BuildPrimaryService(c), BuildReplicaService(c)
	if h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses || h.Name != "demo-instances" {
		t.Errorf("headless %+v", h.Spec)
	}
	if p.Name != "writer" || p.Spec.Selector[LabelRole] != "primary" || p.Spec.Selector[LabelInstance] != "demo" {
		t.Errorf("primary %s %v", p.Name, p.Spec.Selector)
	}
	if r.Name != "demo-replicas" || r.Spec.Selector[LabelRole] != "replica" {
		t.Errorf("replicas %s %v", r.Name, r.Spec.Selector)
	}
}

func TestBuildSecret(t *testing.T) {
	s1, err := BuildSecret(testenv.Cluster())
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := BuildSecret(testenv.Cluster())
	if s1.Name != "demo-credentials" || len(MissingSecretKeys(s1)) != 0 {
		t.Fatalf("secret %s missing %v", s1.Name, MissingSecretKeys(s1))
	}
	for _, k := range SecretKeys {
		if len(s1.Data[k]) != 32 || string(s1.Data[k]) == string(s2.Data[k]) {
			t.Errorf("%s: want 32 random characters, different per call", k)
		}
		if strings.ContainsAny(string(s1.Data[k]), `'"\$@:/ `) {
			t.Errorf("%s contains characters that need quoting", k)
		}
	}
	partial := &corev1.Secret{Data: map[string][]byte{SecretRootPassword: []byte("x"), SecretReplicationPassword: {}}}
	if got := MissingSecretKeys(partial); strings.Join(got, ",") != "replication-password,orchestration-password" {
		t.Errorf("MissingSecretKeys = %v", got)
	}
}

func TestPDBFailClosed(t *testing.T) {
	all := Convergence{true, true, true, true}
	tests := []struct {
		name string
		cv   Convergence
		mut  func(*v1.MysqlCluster)
		want int32
	}{
		{"converged", all, nil, 1},
		{"replicas not converged", Convergence{false, true, true, true}, nil, 0},
		{"image rolling", Convergence{true, false, true, true}, nil, 0},
		{"roles unproven", Convergence{true, true, false, true}, nil, 0},
		{"HA not healthy", Convergence{true, true, true, false}, nil, 0},
		{"nothing known", Convergence{}, nil, 0},
		{"single instance never", all, func(c *v1.MysqlCluster) { c.Spec.Replicas = 1 }, 0},
		// The one replica of a 2-instance cluster is the only acknowledger: evicting it (or the
		// primary, leaving the replica alone as the new primary) starves every commit.
		{"two instances with semi-sync never", all, func(c *v1.MysqlCluster) { c.Spec.Replicas = 2 }, 0},
		{"two instances without semi-sync", all, func(c *v1.MysqlCluster) { c.Spec.Replicas = 2; c.Spec.SemiSync.Enabled = ptr.To(false) }, 1},
		{"waiting for two of three replicas never", all, func(c *v1.MysqlCluster) { c.Spec.SemiSync.WaitForReplicas = 2 }, 0},
		{"waiting for two of four replicas", all, func(c *v1.MysqlCluster) { c.Spec.Replicas = 4; c.Spec.SemiSync.WaitForReplicas = 2 }, 1},
		// An absent member (its pod may still read Ready) acknowledges nothing.
		{"three instances, one absent, never", all, func(c *v1.MysqlCluster) {
			c.Status.AbsentInstances = []v1.AbsentInstance{{Name: c.Name + "-2", Bound: "0-1-5"}}
		}, 0},
	}
	for _, tt := range tests {
		c := testenv.Cluster()
		if tt.mut != nil {
			tt.mut(c)
		}
		pdb := BuildPDB(c, tt.cv)
		if got := pdb.Spec.MaxUnavailable.IntVal; got != tt.want {
			t.Errorf("%s: maxUnavailable %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestConvergenceFromStatus(t *testing.T) {
	healthy := func(c *v1.MysqlCluster) {
		c.Status = v1.MysqlClusterStatus{
			Phase: v1.PhaseRunning, ObservedGeneration: 1, ReadyInstances: 3, CurrentPrimary: "demo-0",
			HA:        &v1.HAStatus{State: v1.HAHealthy},
			Instances: []v1.InstanceStatus{{Name: "demo-0", Role: v1.RolePrimary}, {Name: "demo-1", Role: v1.RoleReplica}, {Name: "demo-2", Role: v1.RoleReplica}},
		}
	}
	if cv := ConvergenceFromStatus(testenv.Cluster(healthy), true); !cv.Converged() {
		t.Errorf("healthy cluster not converged: %+v", cv)
	}
	for name, mut := range map[string]func(*v1.MysqlCluster){
		"stale generation": func(c *v1.MysqlCluster) { c.Generation = 2 },
		"operation":        func(c *v1.MysqlCluster) { c.Status.Operation = &v1.OperationStatus{ID: "x"} },
		"errant":           func(c *v1.MysqlCluster) { c.Status.ErrantInstances = []v1.ErrantInstance{{Name: "demo-2"}} },
		"suspected":        func(c *v1.MysqlCluster) { c.Status.HA.State = v1.HASuspected },
		"unknown role":     func(c *v1.MysqlCluster) { c.Status.Instances[2].Role = v1.RoleUnknown },
		"one not ready":    func(c *v1.MysqlCluster) { c.Status.ReadyInstances = 2 },
		"upgrading":        func(c *v1.MysqlCluster) { c.Status.Upgrade = &v1.UpgradeStatus{Barrier: v1.UpgradePreparing} },
	} {
		if ConvergenceFromStatus(testenv.Cluster(healthy, mut), true).Converged() {
			t.Errorf("%s: converged, want fail-closed", name)
		}
	}
}

func TestPodHost(t *testing.T) {
	c := testenv.Cluster() // demo in namespace db
	if got, want := PodHost(c, "demo-2"), "demo-2.demo-instances.db.svc"; got != want {
		t.Errorf("PodHost = %q, want %q", got, want)
	}
	// The name is the one the StatefulSet's governing Service gives the pod.
	sts, err := BuildStatefulSet(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := PodHost(c, "demo-0"), "demo-0."+sts.Spec.ServiceName+"."+c.Namespace+".svc"; got != want {
		t.Errorf("PodHost = %q, want the governing Service's name %q", got, want)
	}
	if h := BuildHeadlessService(c); h.Name != sts.Spec.ServiceName || h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the governing Service %s (clusterIP %q) must be the headless one", h.Name, h.Spec.ClusterIP)
	}
	other := testenv.Cluster(func(c *v1.MysqlCluster) { c.Name, c.Namespace = "orders", "shop" })
	if got, want := PodHost(other, "orders-1"), "orders-1.orders-instances.shop.svc"; got != want {
		t.Errorf("PodHost = %q, want %q", got, want)
	}
}

// TestMySQLSemiSyncPluginsLoadedAtStart: MySQL loads the semi-sync plugins from my.cnf (with
// super_read_only on from the start, INSTALL PLUGIN would be refused), under the names the
// image's version has.
func TestMySQLSemiSyncPluginsLoadedAtStart(t *testing.T) {
	for image, want := range map[string]string{
		"mysql:8.4": "semisync_source.so", "mysql:8.0.36": "semisync_source.so", "mysql:8.0.26": "semisync_source.so",
		"mysql:8.0.25": "semisync_master.so", "mysql:5.7": "semisync_master.so", "mysql:5.7.44": "semisync_master.so",
		"mysql": "semisync_source.so", "registry:5000/mysql:8.0.21": "semisync_master.so", "mysql:latest": "semisync_source.so",
	} {
		c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "n"}, Spec: v1.MysqlClusterSpec{Image: image, Flavor: v1.FlavorMySQL}}
		cnf, err := RenderMyCnf(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cnf, "plugin_load_add = "+want) {
			t.Errorf("%s: want plugin_load_add = %s in\n%s", image, want, cnf)
		}
	}
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "n"}, Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Flavor: v1.FlavorMariaDB}}
	if cnf, _ := RenderMyCnf(c); strings.Contains(cnf, "plugin_load_add") {
		t.Errorf("MariaDB has semi-sync built in:\n%s", cnf)
	}
}
