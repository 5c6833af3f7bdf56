package specs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// restoredCluster is a cluster created by a restore of backup 20261206T120000Z of team/src.
func restoredCluster() *v1.MysqlCluster {
	c := testenv.Cluster()
	c.Spec.Replicas = 1
	c.Spec.Backup = &v1.BackupSpec{Bucket: "b", Endpoint: "https://s3.example", Prefix: "p/", PathStyle: true, CredentialsSecretName: "bucket-creds"}
	c.Spec.Restore = &v1.RestoreSpec{SourceNamespace: "team", SourceCluster: "src", BackupID: "20261206T120000Z",
		Key: backup.Key("team", "src", "20261206T120000Z", "data.xbstream.zst"), Size: 1234, SHA256: strings.Repeat("ab", 32), GTIDPosition: "0-7-9"}
	return c
}

func TestBuildRestoreJob(t *testing.T) {
	c := restoredCluster()
	job, err := BuildRestoreJob(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != c.Name+"-restore" || *job.Spec.BackoffLimit != 0 {
		t.Errorf("job %s backoffLimit %d: want %s-restore, no retry by the Job", job.Name, *job.Spec.BackoffLimit, c.Name)
	}
	ps := job.Spec.Template.Spec
	if v := ps.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != DataClaimName(c, 0) || v.PersistentVolumeClaim.ReadOnly {
		t.Errorf("data volume %+v: want the first instance's claim %s, writable", v, DataClaimName(c, 0))
	}
	if _, ok := job.Spec.Template.Labels[LabelName]; ok {
		t.Errorf("the restore pod carries %s: a Service of the cluster would select it", LabelName)
	}
	main := ps.Containers[0]
	if main.Image != c.Spec.Image || ps.InitContainers[0].Image != DefaultAgentImage {
		t.Errorf("images %s and %s: want the cluster's server image and mysqlctl's", main.Image, ps.InitContainers[0].Image)
	}
	cmd := strings.Join(main.Command, " ")
	for _, want := range []string{"agent restore", "--key team/src/backups/20261206T120000Z/data.xbstream.zst", "--backup-id 20261206T120000Z",
		"--size 1234", "--sha256 " + c.Spec.Restore.SHA256, "--datadir " + DataDir} {
		if !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %q", cmd, want)
		}
	}
	// The bucket's keys come from its Secret; no literal value holds a credential.
	refs := map[string]string{}
	for _, e := range main.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		} else if strings.Contains(strings.ToLower(e.Name), "secret") || strings.Contains(strings.ToLower(e.Name), "key") {
			t.Errorf("env %s is a literal value", e.Name)
		}
	}
	if refs[backup.EnvAccessKey] != "bucket-creds/"+BucketSecretAccessKey || refs[backup.EnvSecretKey] != "bucket-creds/"+BucketSecretSecretKey {
		t.Errorf("bucket credentials %v: want both keys from bucket-creds", refs)
	}
	if strings.Contains(cmd, "--reset-root-password") || refs[backup.EnvRootPassword] != "" {
		t.Errorf("a restore with the source's Secret resets root's password: %q %v", cmd, refs)
	}
	// From a bucket alone: root's new password comes from the new cluster's own Secret.
	reset := c.DeepCopy()
	reset.Spec.Restore.ResetPasswords = true
	rj, err := BuildRestoreJob(reset, "")
	if err != nil {
		t.Fatal(err)
	}
	rc := rj.Spec.Template.Spec.Containers[0]
	if !slices.Contains(rc.Command, "--reset-root-password") {
		t.Errorf("command %q: want --reset-root-password", rc.Command)
	}
	for _, e := range rc.Env {
		if e.Name == backup.EnvRootPassword && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != SecretName(reset) || e.ValueFrom.SecretKeyRef.Key != SecretRootPassword) {
			t.Errorf("env %s = %+v: want %s/%s by reference", e.Name, e, SecretName(reset), SecretRootPassword)
		}
	}
	if !slices.ContainsFunc(rc.Env, func(e corev1.EnvVar) bool { return e.Name == backup.EnvRootPassword }) {
		t.Errorf("no %s in the env", backup.EnvRootPassword)
	}

	if slices.Contains(rc.Command, "--decrypt") {
		t.Errorf("command %q: --decrypt for a backup that is not encrypted", rc.Command)
	}
	// Encrypted: the private key comes from the restore's identity Secret, by reference only.
	enc := c.DeepCopy()
	enc.Spec.Restore.EncryptedTo = []string{"age1a"}
	ej, err := BuildRestoreJob(enc, "")
	if err != nil {
		t.Fatal(err)
	}
	ec := ej.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ec.Command, "--decrypt") || !slices.ContainsFunc(ec.Env, func(e corev1.EnvVar) bool {
		return e.Name == backup.EnvIdentity && e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == RestoreIdentitySecretName(enc) && e.ValueFrom.SecretKeyRef.Key == RestoreIdentityKey
	}) {
		t.Errorf("encrypted restore: command %q env %+v; want --decrypt and %s from %s by reference", ec.Command, ec.Env, backup.EnvIdentity, RestoreIdentitySecretName(enc))
	}

	c.Spec.Backup = nil
	if _, err := BuildRestoreJob(c, ""); err == nil || !strings.Contains(err.Error(), "spec.backup") {
		t.Errorf("without spec.backup: %v", err)
	}
}

// TestRestoredStatefulSet: no instance while the backup is not in the first volume (a server
// started on the empty volume would initialize it), then spec.replicas; the first volume's claim is
// the one the StatefulSet's template names, so that the StatefulSet adopts it.
func TestRestoredStatefulSet(t *testing.T) {
	c := restoredCluster()
	for _, tc := range []struct {
		status *v1.RestoreStatus
		want   int32
	}{
		{nil, 0},
		{&v1.RestoreStatus{BackupID: "20261206T120000Z"}, 0},
		{&v1.RestoreStatus{BackupID: "20261206T120000Z", RestoredAt: &metav1.Time{}}, 1},
	} {
		c.Status.Restore = tc.status
		c.Status.CurrentPrimary = ""
		sts, err := BuildStatefulSet(c)
		if err != nil {
			t.Fatal(err)
		}
		if *sts.Spec.Replicas != tc.want {
			t.Errorf("status.restore %+v: %d replicas, want %d", tc.status, *sts.Spec.Replicas, tc.want)
		}
	}
	// A bootstrapped cluster keeps its instances even when its status lost status.restore.
	c.Status.Restore, c.Status.CurrentPrimary = nil, c.Name+"-0"
	if sts, err := BuildStatefulSet(c); err != nil || *sts.Spec.Replicas != 1 {
		t.Errorf("a bootstrapped restored cluster without status.restore: %v replicas (%v), want 1", sts.Spec.Replicas, err)
	}
	c.UID = "uid-1"
	pvc, err := BuildDataClaim(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	sts, _ := BuildStatefulSet(c)
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	if pvc.Name != tmpl.Name+"-"+sts.Name+"-0" || pvc.Spec.Resources.Requests.Storage().Cmp(*tmpl.Spec.Resources.Requests.Storage()) != 0 || pvc.Labels[LabelInstance] != c.Name || pvc.Annotations[AnnotationRestoreOf] != "uid-1" {
		t.Errorf("claim %s %+v: want the template's %s-%s-0", pvc.Name, pvc.Spec, tmpl.Name, sts.Name)
	}
}
