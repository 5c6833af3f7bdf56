package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-sql-driver/mysql"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestRestoreFromBucketAlone is the lost namespace: a cluster is backed up, then deleted with its
// volumes and its credentials Secret, and restored under its own name from the bucket alone
// (--from-url, as 'backup list' printed it, and the manifest it was created from), through the
// API server's port-forward, killed once at StartingInstance and run again. The new cluster has a
// Secret of its own: its root password opens the restored data and the old one no longer does;
// the rows are the backup's (equal CHECKSUM TABLE, nothing written after the backup); the cluster
// is Running with its accounts set to the new Secret. No output holds a password.
//
// The backup is encrypted (spec.backup.encryption, an age public key): the bucket holds nothing
// readable, a restore without the private key, or with another, is refused before anything is
// made, and the private key given with --identity is deleted from the cluster once the data is in
// place and never printed.
func TestRestoreFromBucketAlone(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "rsu"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	oldSecret := secret(t, ctx, name)
	oldRoot := string(oldSecret.Data[specs.SecretRootPassword])
	primary := db(t, mustPodAddr(t, ctx, name+"-0"), oldRoot)
	execAll(t, ctx, primary, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64))",
		"INSERT INTO app.t SELECT seq, MD5(seq) FROM app.seq_1_to_2000")
	want := checksum(t, ctx, primary, "app.t")
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	useBucket(t, ctx, name, s3)
	key, other := ageKey(t), ageKey(t)
	updateSpec(t, ctx, name, func(s *v1.MysqlClusterSpec) {
		s.Backup.Encryption = &v1.BackupEncryption{Recipients: []string{key.Recipient().String()}}
	})
	rec := backupCreate(t, name, "--source", name+"-1")
	obj, err := s3.Client().GetObject(ctx, &s3api.GetObjectInput{Bucket: &s3.Bucket, Key: ptr.To("e2e/default/" + name + "/backups/" + rec.ID + "/data.xbstream.zst")})
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 21)
	_, err = io.ReadFull(obj.Body, head)
	_ = obj.Body.Close()
	if err != nil || string(head) != "age-encryption.org/v1" {
		t.Fatalf("the stored backup begins %q (%v): want age's encrypted format", head, err)
	}
	execAll(t, ctx, primary, "INSERT INTO app.t VALUES (2001, 'after the backup')")
	list := mysqlctl(t, "backup", "list", name)
	var outputs []string
	outputs = append(outputs, list.stdout, list.stderr)
	url := "s3://" + s3.Bucket + "/e2e/default/" + name + "/backups/"
	if list.code != 0 || !strings.Contains(list.stdout+list.stderr, url) {
		t.Fatalf("backup list: exit %d; want it to name %s:\n%s\n%s", list.code, url, list.stdout, list.stderr)
	}

	// The manifest the cluster was made from (its spec as it is now, one instance), then the
	// namespace's loss: the cluster, its volumes and its Secret deleted.
	manifest := &v1.MysqlCluster{TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: getCluster(t, ctx, name).Spec}
	manifest.Spec.Replicas = 1
	file := filepath.Join(t.TempDir(), name+".yaml")
	data, err := yaml.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	deleteCluster(t, name)
	eventually(t, ctx, name+"'s volume and Secret gone", func() error {
		if _, err := r.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, specs.DataClaimName(manifest, 0), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.New("its volume claim is still there")
		}
		if _, err := r.Client.CoreV1().Secrets("default").Get(ctx, specs.SecretName(manifest), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.New("its Secret is still there")
		}
		return nil
	})

	// Without the private key, or with another: refused, nothing made.
	identity, otherIdentity := filepath.Join(t.TempDir(), "key.txt"), filepath.Join(t.TempDir(), "other.txt")
	for f, k := range map[string]*age.X25519Identity{identity: key, otherIdentity: other} {
		if err := os.WriteFile(f, []byte("# public key: "+k.Recipient().String()+"\n"+k.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what, want string
		args       []string
	}{
		{"no --identity", "is encrypted (age, to " + key.Recipient().String() + "): give --identity FILE", nil},
		{"another key", "none of them opens it", []string{"--identity", otherIdentity}},
	} {
		res := mysqlctl(t, append([]string{"restore", name, "--from-url", url, "-f", file}, c.args...)...)
		outputs = append(outputs, res.stdout, res.stderr)
		if res.code != 2 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("restore, %s: exit %d %q; want 2 and %q", c.what, res.code, res.stderr, c.want)
		}
		if err := kube(t).Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &v1.MysqlCluster{}); !apierrors.IsNotFound(err) {
			t.Fatalf("restore, %s: the cluster exists (%v)", c.what, err)
		}
		for _, s := range []string{name + "-credentials", name + "-restore-identity"} {
			if _, err := r.Client.CoreV1().Secrets("default").Get(ctx, s, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("restore, %s: the Secret %s exists (%v)", c.what, s, err)
			}
		}
	}

	// The CLI killed once the cluster is created; its private key then lost: a resume stops and
	// says how to give it again. Given again, the CLI is killed once the data is in place (the
	// key still there), and run again with the same command line: the key is deleted.
	args := []string{"restore", name, "--from-url", url, "-f", file, "--identity", identity}
	outputs = append(outputs, killAt(t, ctx, orchestrate.StageRestoringData, args...))
	defer deleteCluster(t, name)
	idSecret := name + "-restore-identity"
	if err := r.Client.CoreV1().Secrets("default").Delete(ctx, idSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the restore's identity Secret after the first run: %v", err)
	}
	res := mysqlctl(t, "resume", name)
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 6 || !strings.Contains(res.stderr, "is encrypted, and the Secret default/"+idSecret+" with a private key that opens it is not there: run the restore command again with --identity FILE") {
		t.Errorf("resume without the private key: exit %d %q; want 6 and how to give it", res.code, res.stderr)
	}
	outputs = append(outputs, killAt(t, ctx, orchestrate.StageStartingInstance, args...))
	if c := getCluster(t, ctx, name); c.Status.Restore == nil || c.Status.Restore.RestoredAt == nil {
		t.Fatalf("killed at StartingInstance: status.restore %+v; want the data in place", c.Status.Restore)
	}
	if _, err := r.Client.CoreV1().Secrets("default").Get(ctx, idSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("the identity Secret before StartingInstance: %v; want it kept until then", err)
	}
	res = mysqlctl(t, append(args, "-o", "json")...)
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 0 {
		t.Fatalf("restore --from-url: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var out struct{ BackupID, From, Phase string }
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out.BackupID != rec.ID || out.From != url || out.Phase != string(v1.PhaseRunning) {
		t.Errorf("output %q (%v): want backup %s from %s, Running", res.stdout, err, rec.ID, url)
	}
	newSecret := secret(t, ctx, name)
	newRoot := string(newSecret.Data[specs.SecretRootPassword])
	if newRoot == "" || newRoot == oldRoot {
		t.Fatalf("the restored cluster's Secret has root password %d bytes long, the same as the lost one's: %v", len(newRoot), newRoot == oldRoot)
	}
	p := db(t, mustPodAddr(t, ctx, name+"-0"), newRoot)
	if got := checksum(t, ctx, p, "app.t"); got != want {
		t.Errorf("CHECKSUM TABLE app.t: restored %s, backed up %s", got, want)
	}
	var rows int
	if err := p.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.t").Scan(&rows); err != nil || rows != 2000 {
		t.Errorf("restored %d rows (%v); want the backup's 2000", rows, err)
	}
	addr := mustPodAddr(t, ctx, name+"-0")
	var me *mysql.MySQLError
	if err := db(t, addr, oldRoot).PingContext(ctx); !errors.As(err, &me) || me.Number != 1045 {
		t.Errorf("the lost cluster's root password on the restored server: %v; want access denied (1045)", err)
	}
	// The accounts mysqlctl made hold the new Secret's passwords too (the bootstrap set them).
	orch, err := sql.Open("mysql", rig.DSN(addr, orchestrate.OrchestrationUser, string(newSecret.Data[specs.SecretOrchestrationPassword])))
	if err != nil {
		t.Fatal(err)
	}
	defer orch.Close()
	if err := orch.PingContext(ctx); err != nil {
		t.Errorf("the orchestration account with the new Secret's password: %v", err)
	}
	noPasswords(t, oldSecret, outputs...)
	noPasswords(t, newSecret, outputs...)
	// The private key is gone from the cluster, and was never printed, recorded or in an Event.
	if _, err := r.Client.CoreV1().Secrets("default").Get(ctx, name+"-restore-identity", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the restore's identity Secret is left: %v", err)
	}
	status, err := json.Marshal(getCluster(t, ctx, name))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	evJSON, _ := json.Marshal(evs.Items)
	secretPart := strings.TrimPrefix(key.String(), "AGE-SECRET-KEY-1")
	for _, txt := range append(outputs, string(status), string(evJSON)) {
		if strings.Contains(strings.ToUpper(txt), secretPart) {
			t.Errorf("the private key leaked into %.80q", txt)
		}
	}
}

func ageKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	k, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
