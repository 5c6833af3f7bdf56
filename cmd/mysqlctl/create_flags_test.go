package main

import (
	"testing"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// TestCreateFlagsFillEverySpecField parses a full command line (no I/O) and checks the
// resulting object.
func TestCreateFlagsFillEverySpecField(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ios, _, _, _ := iostreams.Test()
	f := newFactory(ios, "mysqlctl", func(string) string { return "" })
	root := NewCmdRoot(f)
	for _, c := range root.Commands() {
		if c.Name() == "create" {
			root.RemoveCommand(c)
		}
	}
	var got *v1.MysqlCluster
	root.AddCommand(NewCmdCreate(f, func(o *CreateOptions) error { got = o.Cluster; return nil }))
	code := execute(f, root, []string{
		"create", "shop", "-n", "team", "--image", "mariadb:11.4", "--replicas", "5",
		"--storage-size", "20Gi", "--storage-class", "fast", "--primary-service", "shop-rw", "--replica-service", "shop-ro",
		"--credentials-secret", "shop-creds", "--mysql-config", "max_connections=500", "--semi-sync=false",
		"--semi-sync-wait-for", "2", "--semi-sync-timeout", "30s", "--auto-failover=false", "--detection-interval", "2s",
		"--failure-threshold", "5", "--cooldown", "10m", "--max-candidate-lag", "5s", "--requests", "cpu=500m,memory=1Gi",
		"--limits", "memory=2Gi", "--paused",
	})
	if code != cmdutil.ExitOK || got == nil {
		t.Fatalf("exit %d", code)
	}
	s := got.Spec
	checks := []struct {
		field     string
		got, want any
	}{
		{"namespace", got.Namespace, "team"},
		{"image", s.Image, "mariadb:11.4"},
		{"flavor", s.Flavor, v1.FlavorMariaDB},
		{"replicas", s.Replicas, int32(5)},
		{"storage", s.Storage.Size + "/" + *s.Storage.StorageClassName, "20Gi/fast"},
		{"services", s.PrimaryService + "/" + s.ReplicaService, "shop-rw/shop-ro"},
		{"secret", s.CredentialsSecretName, "shop-creds"},
		{"mysqlConfig", s.MysqlConfig["max_connections"], "500"},
		{"semiSync", *s.SemiSync.Enabled, false},
		{"semiSync wait", s.SemiSync.WaitForReplicas, int32(2)},
		{"semiSync timeout", s.SemiSync.Timeout.Duration, 30 * time.Second},
		{"auto", *s.Failover.Auto, false},
		{"interval", s.Failover.DetectionInterval.Duration, 2 * time.Second},
		{"threshold", s.Failover.FailureThreshold, int32(5)},
		{"cooldown", s.Failover.Cooldown.Duration, 10 * time.Minute},
		{"lag", s.Failover.MaxCandidateLag.Duration, 5 * time.Second},
		{"requests", s.Resources.Requests.Cpu().String() + "/" + s.Resources.Requests.Memory().String(), "500m/1Gi"},
		{"limits", s.Resources.Limits.Memory().String(), "2Gi"},
		{"paused", s.Paused, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	if r := runCommand(t, runOpts{}, "create", "x", "--requests", "cpu=lots", "--dry-run"); r.code != cmdutil.ExitUsage {
		t.Errorf("bad quantity: exit %d %s", r.code, r.stderr)
	}
}
