package v1alpha1

import "testing"

func TestFlavorFromImage(t *testing.T) {
	for image, want := range map[string]Flavor{
		"mariadb:10.11":                        FlavorMariaDB,
		"docker.io/library/mariadb:11.4":       FlavorMariaDB,
		"registry.example.com:5000/mariadb":    FlavorMariaDB,
		"quay.io/team/mariadb-custom@sha256:0": FlavorMariaDB,
		"mysql:8.4":                            FlavorMySQL,
		"percona/percona-server:8.0":           FlavorMySQL,
		// The registry host says mariadb, the repository does not: the repository decides.
		"mariadb.example.com/db/mysql:8.0": FlavorMySQL,
	} {
		if got := FlavorFromImage(image); got != want {
			t.Errorf("FlavorFromImage(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestDefaultKeepsSetFields(t *testing.T) {
	c := &MysqlCluster{}
	c.Name = "db"
	c.Spec.Image = "mariadb:10.11"
	c.Spec.PrimaryService = "writer"
	c.Default()
	if c.Spec.PrimaryService != "writer" || c.Spec.ReplicaService != "db-replicas" ||
		c.Spec.CredentialsSecretName != "db-credentials" || c.Spec.Flavor != FlavorMariaDB {
		t.Errorf("Default: %+v", c.Spec)
	}
}

func TestIsOwnedConfigKey(t *testing.T) {
	for k, want := range map[string]bool{
		"server_id": true, "Server-Id": true, "loose-server-id": true, "skip-log-bin": true, "disable_log_bin": true,
		"skip_slave_start": true, "skip-replica-start": true, "rpl_semi_sync_master_enabled": true, "loose_rpl_semi_sync_source_timeout": true,
		"max_connections": false, "skip_name_resolve": false, "innodb_buffer_pool_size": false, "loose_": false, "portal": false,
	} {
		if got := IsOwnedConfigKey(k); got != want {
			t.Errorf("IsOwnedConfigKey(%q) = %v, want %v", k, got, want)
		}
	}
}
