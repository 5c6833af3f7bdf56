package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// These tests run against a real kube-apiserver with the CRD generated into manifests/crd, so
// they prove what the API server itself accepts and refuses, whichever client sends it.

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

func newClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var nameSeq int

func cluster(mutate func(*v1.MysqlCluster)) *v1.MysqlCluster {
	nameSeq++
	c := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", nameSeq), Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestValidClusterGetsDefaults(t *testing.T) {
	c := newClient(t)
	obj := cluster(nil)
	if err := c.Create(ctx(t), obj); err != nil {
		t.Fatalf("valid cluster refused: %v", err)
	}
	got := &v1.MysqlCluster{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	checks := []struct {
		field     string
		got, want any
	}{
		{"replicas", s.Replicas, int32(3)},
		{"storage.size", s.Storage.Size, "10Gi"},
		{"semiSync.enabled", s.SemiSync.Enabled != nil && *s.SemiSync.Enabled, true},
		{"semiSync.waitForReplicas", s.SemiSync.WaitForReplicas, int32(1)},
		{"semiSync.timeout", durationOf(s.SemiSync.Timeout), 24 * time.Hour},
		{"failover.auto", s.Failover.Auto != nil && *s.Failover.Auto, true},
		{"failover.reseedUnacknowledged", s.Failover.ReseedUnacknowledged != nil && *s.Failover.ReseedUnacknowledged, true},
		{"failover.detectionInterval", durationOf(s.Failover.DetectionInterval), time.Second},
		{"failover.failureThreshold", s.Failover.FailureThreshold, int32(3)},
		{"failover.cooldown", durationOf(s.Failover.Cooldown), 5 * time.Minute},
		{"failover.maxCandidateLag", durationOf(s.Failover.MaxCandidateLag), 30 * time.Second},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("default %s = %v, want %v", ch.field, ch.got, ch.want)
		}
	}
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return -1
	}
	return d.Duration
}

func TestValidSpecsAccepted(t *testing.T) {
	c := newClient(t)
	for name, mutate := range map[string]func(*v1.MysqlCluster){
		"one instance":       func(m *v1.MysqlCluster) { m.Spec.Replicas = 1 },
		"64 instances":       func(m *v1.MysqlCluster) { m.Spec.Replicas = 64 },
		"registry with port": func(m *v1.MysqlCluster) { m.Spec.Image = "registry.example.com:5000/db/mysql:8.4.3" },
		"digest":             func(m *v1.MysqlCluster) { m.Spec.Image = "mysql@sha256:" + strings.Repeat("ab", 32) },
		"storage 500Mi":      func(m *v1.MysqlCluster) { m.Spec.Storage.Size = "500Mi" },
		"free-form config": func(m *v1.MysqlCluster) {
			m.Spec.MysqlConfig = map[string]string{"max_connections": "500", "innodb-buffer-pool-size": "1G"}
		},
		"explicit names":       func(m *v1.MysqlCluster) { m.Default() },
		"semi-sync off":        func(m *v1.MysqlCluster) { m.Spec.SemiSync.Enabled = ptr.To(false) },
		"semi-sync wait for 2": func(m *v1.MysqlCluster) { m.Spec.Replicas = 5; m.Spec.SemiSync.WaitForReplicas = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			if err := c.Create(ctx(t), cluster(mutate)); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

func TestInvalidSpecsRefusedWithReadableMessages(t *testing.T) {
	c := newClient(t)
	tests := []struct {
		name   string
		mutate func(*v1.MysqlCluster)
		want   []string
	}{
		{"zero replicas", func(m *v1.MysqlCluster) { m.Spec.Replicas = -1 }, []string{"spec.replicas", "greater than or equal to 1"}},
		{"65 replicas", func(m *v1.MysqlCluster) { m.Spec.Replicas = 65 }, []string{"spec.replicas", "less than or equal to 64"}},
		{"empty image", func(m *v1.MysqlCluster) { m.Spec.Image = "" }, []string{"spec.image"}},
		{"upper-case image", func(m *v1.MysqlCluster) { m.Spec.Image = "MySQL:8.4" }, []string{"image must be a valid image reference such as mysql:8.4"}},
		{"image with spaces", func(m *v1.MysqlCluster) { m.Spec.Image = "mysql 8.4" }, []string{"image must be a valid image reference"}},
		{"image bad digest", func(m *v1.MysqlCluster) { m.Spec.Image = "mysql@sha256:xyz" }, []string{"image must be a valid image reference"}},
		{"storage words", func(m *v1.MysqlCluster) { m.Spec.Storage.Size = "ten gigs" }, []string{"storage.size must be a positive Kubernetes quantity such as 10Gi"}},
		{"storage zero", func(m *v1.MysqlCluster) { m.Spec.Storage.Size = "0" }, []string{"storage.size must be a positive Kubernetes quantity"}},
		{"storage negative", func(m *v1.MysqlCluster) { m.Spec.Storage.Size = "-1Gi" }, []string{"storage.size must be a positive Kubernetes quantity"}},
		{"owned key with dashes", func(m *v1.MysqlCluster) {
			m.Spec.MysqlConfig = map[string]string{"server-id": "7", "max_connections": "10"}
		}, []string{"mysqlConfig must not set options that mysqlctl manages for replication and failover safety (server_id, "}},
		{"semi-sync prefix", func(m *v1.MysqlCluster) {
			m.Spec.MysqlConfig = map[string]string{"RPL_SEMI_SYNC_MASTER_TIMEOUT": "10"}
		}, []string{"mysqlConfig must not set options that mysqlctl manages", "rpl_semi_sync_*"}},
		{"modifier prefixes", func(m *v1.MysqlCluster) { m.Spec.MysqlConfig = map[string]string{"skip-log-bin": "1"} }, []string{"mysqlConfig must not set options"}},
		{"config key syntax", func(m *v1.MysqlCluster) { m.Spec.MysqlConfig = map[string]string{"bad key": "1"} }, []string{"mysqlConfig keys must be option names"}},
		{"semi-sync waits for too many", func(m *v1.MysqlCluster) { m.Spec.SemiSync.WaitForReplicas = 3 }, []string{"semiSync.waitForReplicas must be less than replicas"}},
		{"semi-sync timeout too short", func(m *v1.MysqlCluster) { m.Spec.SemiSync.Timeout = &metav1.Duration{Duration: time.Millisecond} }, []string{"semiSync.timeout must be at least 1s"}},
		{"detection interval too long", func(m *v1.MysqlCluster) {
			m.Spec.Failover.DetectionInterval = &metav1.Duration{Duration: time.Hour}
		}, []string{"failover.detectionInterval must be between 100ms and 1m"}},
		{"same service twice", func(m *v1.MysqlCluster) {
			m.Spec.PrimaryService, m.Spec.ReplicaService = "db", "db"
		}, []string{"primaryService and replicaService must be different names"}},
		{"service name syntax", func(m *v1.MysqlCluster) { m.Spec.PrimaryService = "Primary_DB" }, []string{"primaryService must be a DNS-1035 label"}},
		{"secret name syntax", func(m *v1.MysqlCluster) { m.Spec.CredentialsSecretName = "Creds!" }, []string{"credentialsSecretName must be a DNS-1123 subdomain"}},
		{"unknown flavor", func(m *v1.MysqlCluster) { m.Spec.Flavor = "postgres" }, []string{"spec.flavor", `supported values: "mysql", "mariadb"`}},
		{"not an age public key", func(m *v1.MysqlCluster) {
			m.Spec.Backup = &v1.BackupSpec{Bucket: "bkt", CredentialsSecretName: "s", Encryption: &v1.BackupEncryption{Recipients: []string{
				"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p", "AGE-SECRET-KEY-1QQQQ"}}}
		}, []string{"spec.backup.encryption.recipients[1]", "should match"}},
		{"no recipient", func(m *v1.MysqlCluster) {
			m.Spec.Backup = &v1.BackupSpec{Bucket: "bkt", CredentialsSecretName: "s", Encryption: &v1.BackupEncryption{Recipients: []string{}}}
		}, []string{"spec.backup.encryption.recipients"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(ctx(t), cluster(tt.mutate))
			if err == nil {
				t.Fatal("accepted, want refused")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestEveryOwnedKeyRefused keeps the CEL rule and v1.OwnedConfigKeys equal: each key the Go
// code owns is refused on its own (also spelled with dashes and in upper case), and the message
// names every one of them.
func TestEveryOwnedKeyRefused(t *testing.T) {
	c := newClient(t)
	for _, k := range v1.OwnedConfigKeys {
		for _, spelling := range []string{k, strings.ToUpper(strings.ReplaceAll(k, "_", "-")), "loose-" + k, "skip_" + k, "disable-" + k} {
			err := c.Create(ctx(t), cluster(func(m *v1.MysqlCluster) { m.Spec.MysqlConfig = map[string]string{spelling: "1"} }))
			if err == nil {
				t.Errorf("mysqlConfig %q accepted", spelling)
				continue
			}
			for _, named := range v1.OwnedConfigKeys {
				if !strings.Contains(err.Error(), named+",") {
					t.Errorf("message does not name %s: %v", named, err)
				}
			}
		}
	}
}

func TestImmutableFields(t *testing.T) {
	c := newClient(t)
	obj := cluster(func(m *v1.MysqlCluster) { m.Default() })
	if err := c.Create(ctx(t), obj); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*v1.MysqlCluster)
		want   string
	}{
		{"primaryService changed", func(m *v1.MysqlCluster) { m.Spec.PrimaryService = "other" }, "primaryService is immutable"},
		{"replicaService changed", func(m *v1.MysqlCluster) { m.Spec.ReplicaService = "other" }, "replicaService is immutable"},
		{"credentials changed", func(m *v1.MysqlCluster) { m.Spec.CredentialsSecretName = "other" }, "credentialsSecretName is immutable"},
		{"primaryService removed", func(m *v1.MysqlCluster) { m.Spec.PrimaryService = "" }, "primaryService cannot be removed once set"},
		{"credentials removed", func(m *v1.MysqlCluster) { m.Spec.CredentialsSecretName = "" }, "credentialsSecretName cannot be removed once set"},
		{"flavor changed", func(m *v1.MysqlCluster) { m.Spec.Flavor = v1.FlavorMySQL }, "flavor is immutable"},
		// The StatefulSet's volume claim templates cannot change: refused here, before apply
		// writes the ConfigMap or the budget (README's create then apply of another size did).
		{"storage size changed", func(m *v1.MysqlCluster) { m.Spec.Storage.Size = "1Gi" }, "storage.size is fixed once the cluster exists (volume expansion is not supported): it is 10Gi"},
		{"storage class set", func(m *v1.MysqlCluster) { m.Spec.Storage.StorageClassName = ptr.To("fast") }, "storage.storageClassName is fixed once the cluster exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := &v1.MysqlCluster{}
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), live); err != nil {
				t.Fatal(err)
			}
			tt.mutate(live)
			err := c.Update(ctx(t), live)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("update: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// A mutable field still changes.
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Replicas = 5
	if err := c.Update(ctx(t), live); err != nil {
		t.Errorf("changing replicas was refused: %v", err)
	}
}

func TestStatusSubresource(t *testing.T) {
	c := newClient(t)
	obj := cluster(nil)
	if err := c.Create(ctx(t), obj); err != nil {
		t.Fatal(err)
	}
	// Status written through the subresource persists.
	obj.Status.Phase = v1.PhaseRunning
	obj.Status.CurrentPrimary = obj.Name + "-0"
	if err := c.Status().Update(ctx(t), obj); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got := &v1.MysqlCluster{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PhaseRunning || got.Status.CurrentPrimary != obj.Name+"-0" {
		t.Fatalf("status not persisted: %+v", got.Status)
	}
	// Status sent with a spec write is ignored.
	got.Status.Phase = v1.PhaseDegraded
	got.Spec.Replicas = 1
	if err := c.Update(ctx(t), got); err != nil {
		t.Fatal(err)
	}
	again := &v1.MysqlCluster{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), again); err != nil {
		t.Fatal(err)
	}
	if again.Spec.Replicas != 1 {
		t.Errorf("spec write lost: replicas %d", again.Spec.Replicas)
	}
	if again.Status.Phase != v1.PhaseRunning {
		t.Errorf("status changed through the main resource: phase %q", again.Status.Phase)
	}
	// And a spec change sent through the status subresource is ignored.
	again.Spec.Replicas = 7
	again.Status.Phase = v1.PhaseDegraded
	if err := c.Status().Update(ctx(t), again); err != nil {
		t.Fatal(err)
	}
	final := &v1.MysqlCluster{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), final); err != nil {
		t.Fatal(err)
	}
	if final.Spec.Replicas != 1 || final.Status.Phase != v1.PhaseDegraded {
		t.Errorf("status subresource: replicas %d phase %q, want 1 Degraded", final.Spec.Replicas, final.Status.Phase)
	}
}
