package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/utils/ptr"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestAgentBackupAndRestore runs the commands a backup Job and a restore Job run, against a real
// server, mariadb-backup and object store: the result line and the termination message agree, the
// restore of what the backup reported continues at its GTID position, and neither the server's
// password nor the bucket's secret key appears in any output.
func TestAgentBackupAndRestore(t *testing.T) {
	const pwd, user = "agent-backup-secret", "mysqlctl_backup"
	src := mariadbtest.Start(t, mariadbtest.Options{})
	src.Exec(t,
		"CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+pwd+"'",
		"GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO '"+user+"'@'%'",
		"INSERT INTO app.t (v) VALUES ('one'), ('two')")
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	env := map[string]string{
		backup.EnvEndpoint: s3.Endpoint, backup.EnvRegion: s3.Region, backup.EnvBucket: s3.Bucket,
		backup.EnvPrefix: "team-a/", backup.EnvPathStyle: "true",
		backup.EnvAccessKey: s3.AccessKey, backup.EnvSecretKey: s3.SecretKey, "MYSQL_PWD": pwd,
	}
	term := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(term, nil, 0o666); err != nil { // the kubelet's file
		t.Fatal(err)
	}
	res := runCommand(t, runOpts{env: env}, "agent", "backup", "--host", src.Host, "--port", strconv.Itoa(src.Port),
		"--datadir", src.DataDir, "--id", "20261206T120000Z", "--namespace", "ns", "--cluster", "c", "--source", "c-1",
		"--termination-log", term)
	if res.code != 0 {
		t.Fatalf("agent backup: exit %d\n%s", res.code, res.stderr)
	}
	for _, out := range []string{res.stdout, res.stderr} {
		if strings.Contains(out, pwd) || strings.Contains(out, s3.SecretKey) {
			t.Errorf("the agent's output holds a secret")
		}
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	last := lines[len(lines)-1]
	msg, err := os.ReadFile(term)
	if err != nil || string(msg) != last {
		t.Fatalf("termination message %q (%v), want the result line %q", msg, err, last)
	}
	var got struct {
		Result struct {
			Manifest backup.Manifest `json:"manifest"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &got); err != nil || len(got.Result.Manifest.Objects) != 1 {
		t.Fatalf("result %s (%v): want the manifest of one object", msg, err)
	}
	m := got.Result.Manifest
	if want := src.QueryString(t, "SELECT @@gtid_binlog_pos"); m.GTIDPosition != want || m.Source != "c-1" || m.ServerVersion == "" {
		t.Errorf("manifest %+v: want the idle server's position %s, source c-1 and its version", m, want)
	}
	// The manifest in the bucket, written last, is the one reported.
	body, err := s3.Client().GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &s3.Bucket, Key: ptr.To("team-a/ns/c/backups/20261206T120000Z/manifest.json")})
	if err != nil {
		t.Fatalf("the manifest in the bucket: %v", err)
	}
	stored, _ := io.ReadAll(body.Body)
	_ = body.Body.Close()
	if sm, err := backup.Decode(stored); err != nil || sm.Objects[0] != m.Objects[0] || sm.GTIDPosition != m.GTIDPosition {
		t.Errorf("stored manifest %+v (%v), reported %+v", sm, err, m)
	}

	// The same backup again: refused, the manifest kept.
	again := runCommand(t, runOpts{env: env}, "agent", "backup", "--host", src.Host, "--port", strconv.Itoa(src.Port),
		"--datadir", src.DataDir, "--id", "20261206T120000Z", "--namespace", "ns", "--cluster", "c", "--source", "c-2", "--termination-log", "")
	if again.code != 4 || !strings.Contains(again.stderr, "already complete") {
		t.Errorf("a second backup under the same ID: exit %d %q; want 4, refused", again.code, again.stderr)
	}

	dataDir := t.TempDir()
	res = runCommand(t, runOpts{env: env}, "agent", "restore", "--key", "ns/c/backups/20261206T120000Z/data.xbstream.zst", "--backup-id", "20261206T120000Z",
		"--size", strconv.FormatInt(m.Objects[0].Size, 10), "--sha256", m.Objects[0].SHA256,
		"--datadir", dataDir, "--termination-log", "")
	if res.code != 0 {
		t.Fatalf("agent restore: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, `"gtidPosition":"`+m.GTIDPosition+`"`) {
		t.Errorf("restore result %s, want the backup's position %s", res.stdout, m.GTIDPosition)
	}
	dst := mariadbtest.Start(t, mariadbtest.Options{DataDir: dataDir})
	if n := dst.QueryString(t, "SELECT COUNT(*) FROM app.t WHERE v IN ('one', 'two')"); n != "2" {
		t.Errorf("the restored server has %s of the 2 rows", n)
	}

	// Without the bucket's secret key: a clear error, exit 2, nothing run.
	delete(env, backup.EnvSecretKey)
	res = runCommand(t, runOpts{env: env}, "agent", "backup", "--host", src.Host, "--id", "20261206T130000Z", "--namespace", "ns", "--cluster", "c", "--source", "c-1", "--termination-log", "")
	if res.code != 2 || !strings.Contains(res.stderr, backup.EnvSecretKey) {
		t.Errorf("agent backup without a secret key: exit %d, %q; want 2 naming %s", res.code, res.stderr, backup.EnvSecretKey)
	}
}

// TestToolEnvKeepsBucketKeysFromTheTool: mariadb-backup gets the server's password and never the
// bucket's configuration or keys.
func TestToolEnvKeepsBucketKeysFromTheTool(t *testing.T) {
	env := toolEnv([]string{"PATH=/bin", "AWS_SECRET_ACCESS_KEY=s", "AWS_ACCESS_KEY_ID=a", backup.EnvEndpoint + "=e", "MYSQL_PWD=old", "HOME=/"}, "pw")
	if got, want := strings.Join(env, " "), "PATH=/bin HOME=/ MYSQL_PWD=pw"; got != want {
		t.Errorf("tool environment %q, want %q", got, want)
	}
}
