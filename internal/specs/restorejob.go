package specs

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
)

// A restore (spec.restore) puts a backup into the first instance's volume before its server ever
// starts on it: the volume is claimed under the name the StatefulSet's claim template gives it (so
// that the StatefulSet adopts it), a Job of the cluster's server image runs `mysqlctl agent
// restore` on it (the binary copied in by an init container, as for a backup), and only then does
// the StatefulSet get its first instance.
const (
	// RestoreComponent labels restore Jobs and their pods.
	RestoreComponent = "restore"
	// restoreDeadline bounds a restore Job's run. A failed pod is not tried again by the Job:
	// the operation reports why at once (a damaged object fails every try alike), deletes the
	// Job, and 'resume' runs a new one, which starts over in the same volume.
	restoreDeadline = int64(12 * 3600)
	restoreRetries  = int32(0)
)

// DataClaimName is the claim the StatefulSet's claim template gives the instance of the ordinal.
func DataClaimName(c *v1.MysqlCluster, ordinal int32) string {
	return fmt.Sprintf("data-%s-%d", StatefulSetName(c), ordinal)
}

// RestorePending reports whether spec.restore's data is not in its volume yet: the StatefulSet
// then runs no instance (a server started on the empty volume would initialize it).
func RestorePending(c *v1.MysqlCluster) bool {
	// A bootstrapped cluster (a primary recorded) is past its restore whatever its status says
	// of it: a status written without status.restore never takes its instances away.
	return c.Spec.Restore != nil && c.Status.CurrentPrimary == "" && (c.Status.Restore == nil || c.Status.Restore.RestoredAt == nil)
}

// AnnotationRestoreOf marks a volume claim a restore created with its cluster's UID: a claim of
// the same name without it (kept from an earlier cluster of that name) is never restored into.
const AnnotationRestoreOf = "mysqlctl.io/restore-of"

// BuildDataClaim is the first instance's volume claim, as the StatefulSet would make it: a
// restore creates it before the StatefulSet exists.
func BuildDataClaim(c *v1.MysqlCluster, ordinal int32) (*corev1.PersistentVolumeClaim, error) {
	sts, err := BuildStatefulSet(c)
	if err != nil {
		return nil, err
	}
	t := sts.Spec.VolumeClaimTemplates[0]
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: TypeMeta("v1", "PersistentVolumeClaim"),
		ObjectMeta: metav1.ObjectMeta{Name: DataClaimName(c, ordinal), Namespace: c.Namespace, Labels: t.Labels,
			Annotations: map[string]string{AnnotationRestoreOf: string(c.UID)}},
		Spec: t.Spec,
	}
	return pvc, nil
}

// RestoreJobName is the Job that restores spec.restore into the cluster's first volume.
func RestoreJobName(c *v1.MysqlCluster) string {
	suffix := "-restore"
	name := c.Name
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// BuildRestoreJob is the Job that restores spec.restore into the claim of the cluster's first
// instance. It reads the bucket of spec.backup with the keys of its Secret.
func BuildRestoreJob(c *v1.MysqlCluster, agentImage string) (*batchv1.Job, error) {
	rs, b := c.Spec.Restore, c.Spec.Backup
	switch {
	case rs == nil:
		return nil, fmt.Errorf("cluster %s has no spec.restore", c.Name)
	case b == nil:
		return nil, fmt.Errorf("cluster %s has no spec.backup: a restore reads its bucket", c.Name)
	}
	if agentImage == "" {
		agentImage = DefaultAgentImage
	}
	labels := map[string]string{LabelInstance: c.Name, LabelManagedBy: FieldOwner, LabelComponent: RestoreComponent}
	meta := ObjectMeta(c, RestoreJobName(c), RestoreComponent)
	meta.Labels = labels
	retries, deadline := restoreRetries, restoreDeadline
	agent := AgentDir + "/mysqlctl"
	bucket := Bucket{Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix, PathStyle: b.PathStyle, SecretName: b.CredentialsSecretName}
	command := []string{agent, "agent", "restore",
		"--key", rs.Key, "--backup-id", rs.BackupID,
		"--size", strconv.FormatInt(rs.Size, 10), "--sha256", rs.SHA256,
		"--datadir", DataDir}
	env := bucketEnv(bucket)
	if rs.ResetPasswords {
		// The new root password, from the new cluster's Secret: never a value in the spec.
		command = append(command, "--reset-root-password")
		env = append(env, secretEnv(backup.EnvRootPassword, SecretName(c), SecretRootPassword))
	}
	if len(rs.EncryptedTo) > 0 {
		// The private key, from the Secret the restore command made: never a value.
		command = append(command, "--decrypt")
		env = append(env, secretEnv(backup.EnvIdentity, RestoreIdentitySecretName(c), RestoreIdentityKey))
	}
	return &batchv1.Job{
		TypeMeta:   TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          &retries,
			ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Volumes: []corev1.Volume{
						{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: DataClaimName(c, 0)}}},
						{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					InitContainers: []corev1.Container{agentInstaller(agentImage)},
					Containers: []corev1.Container{{
						Name:    RestoreComponent,
						Image:   c.Spec.Image,
						Command: command,
						Env:     env,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: DataDir},
							{Name: "agent", MountPath: AgentDir},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}, nil
}
