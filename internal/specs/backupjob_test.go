package specs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// sourcePod is a StatefulSet pod as BuildStatefulSet makes it, scheduled, running an image other
// than spec.image (an upgrade in flight).
func sourcePod(t *testing.T) *corev1.Pod {
	t.Helper()
	c := testenv.Cluster()
	sts, err := BuildStatefulSet(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{Spec: *sts.Spec.Template.Spec.DeepCopy()}
	p.Name, p.Namespace, p.Spec.NodeName = c.Name+"-1", c.Namespace, "node-a"
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + p.Name}}})
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == ContainerName {
			p.Spec.Containers[i].Image = "mariadb:10.11.9"
		}
	}
	return p
}

func TestBuildBackupJob(t *testing.T) {
	c := testenv.Cluster()
	src := sourcePod(t)
	bucket := Bucket{Endpoint: "https://s3.example", Region: "eu-west-1", Bucket: "b", Prefix: "p/", PathStyle: true, SecretName: "bucket-creds"}
	job, err := BuildBackupJob(c, BackupJobOptions{ID: "20261206T120000Z", Source: src, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != c.Name+"-backup-20261206t120000z" || *job.Spec.BackoffLimit != 0 {
		t.Errorf("job %s backoffLimit %d", job.Name, *job.Spec.BackoffLimit)
	}
	ps := job.Spec.Template.Spec
	terms := ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || !slices.Equal(terms[0].MatchFields[0].Values, []string{"node-a"}) {
		t.Errorf("affinity %+v: want the source's node only", terms)
	}
	if v := ps.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "data-"+src.Name || !v.PersistentVolumeClaim.ReadOnly {
		t.Errorf("data volume %+v: want the source's claim, read-only", v)
	}
	if ps.InitContainers[0].Image != DefaultAgentImage || len(ps.InitContainers[0].Command) != 0 {
		t.Errorf("init container %+v: want mysqlctl's image with its entrypoint", ps.InitContainers[0])
	}
	main := ps.Containers[0]
	if main.Image != "mariadb:10.11.9" {
		t.Errorf("backup container image %s: want the source pod's own (the server's version), not spec.image %s", main.Image, c.Spec.Image)
	}
	cmd := strings.Join(main.Command, " ")
	for _, want := range []string{"--host " + PodHost(c, src.Name), "--source " + src.Name, "--id 20261206T120000Z", "--cluster " + c.Name, "--namespace " + c.Namespace, "--cluster-uid "} {
		if !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %q", cmd, want)
		}
	}
	if strings.Contains(cmd, "--recipient") {
		t.Errorf("command %q: encrypted with no spec.backup.encryption", cmd)
	}
	// Encrypted: each public key is a --recipient (public keys only ever reach the Job).
	enc := c.DeepCopy()
	enc.Spec.Backup = &v1.BackupSpec{Bucket: "b", CredentialsSecretName: "bucket-creds", Encryption: &v1.BackupEncryption{Recipients: []string{"age1a", "age1b"}}}
	ej, err := BuildBackupJob(enc, BackupJobOptions{ID: "20261206T120000Z", Source: src, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	if ecmd := strings.Join(ej.Spec.Template.Spec.Containers[0].Command, " "); !strings.HasSuffix(ecmd, " --recipient age1a --recipient age1b") {
		t.Errorf("encrypted backup's command %q: want both public keys as --recipient", ecmd)
	}
	for _, m := range main.VolumeMounts {
		if m.MountPath == DataDir && !m.ReadOnly {
			t.Errorf("the data directory is mounted writable")
		}
	}
	// Every credential comes from a Secret, none is a literal value.
	secrets := map[string]string{}
	for _, e := range main.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	want := map[string]string{"MYSQL_PWD": SecretName(c) + "/" + SecretBackupPassword,
		backup.EnvAccessKey: "bucket-creds/" + BucketSecretAccessKey, backup.EnvSecretKey: "bucket-creds/" + BucketSecretSecretKey}
	for k, v := range want {
		if secrets[k] != v {
			t.Errorf("env %s from %q, want the Secret key %s", k, secrets[k], v)
		}
	}
	// The agent reads the bucket back from the environment as given.
	env := map[string]string{}
	for _, e := range main.Env {
		env[e.Name] = e.Value
	}
	env[backup.EnvAccessKey], env[backup.EnvSecretKey] = "a", "s"
	got, err := backup.StoreConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || got.Endpoint != bucket.Endpoint || got.Region != bucket.Region || got.Bucket != bucket.Bucket || got.Prefix != bucket.Prefix || !got.PathStyle {
		t.Errorf("the agent reads %v (%v), want %+v", got, err, bucket)
	}

	long := testenv.Cluster(func(c *v1.MysqlCluster) { c.Name = strings.Repeat("a", 62) })
	if n := BackupJobName(long, "20261206T120000Z-abcdef"); len(n) > 63 || !strings.HasSuffix(n, "-backup-20261206t120000z-abcdef") {
		t.Errorf("job name %q (%d characters): want at most 63, ending in the ID", n, len(n))
	}
	src.Spec.NodeName = ""
	if _, err := BuildBackupJob(c, BackupJobOptions{ID: "20261206T120000Z", Source: src, Bucket: bucket}); err == nil {
		t.Errorf("a pod on no node: no error")
	}
}
