package specs

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
)

// A backup Job (internal/backup/DESIGN.md): it runs on the source instance's node and mounts
// its data volume read-only; an init container from mysqlctl's image copies the mysqlctl binary
// into a shared volume, and the main container, of the image the source pod runs (so the backup
// tool is the server's own version), runs `mysqlctl agent backup`.
const (
	// BackupComponent labels backup Jobs and their pods.
	BackupComponent = "backup"
	// DefaultAgentImage is mysqlctl's image, as `make image` builds it and manifests/watch runs it.
	DefaultAgentImage = "mysqlctl:latest"
	// AgentDir is where the init container puts the binary, in the Job's shared volume.
	AgentDir = "/mysqlctl-agent"
	// Keys of the Secret with the bucket's credentials.
	BucketSecretAccessKey = "access-key-id"
	BucketSecretSecretKey = "secret-access-key"
	// BackupUser is the account a backup connects as: RELOAD, PROCESS, BINLOG MONITOR and SLAVE
	// MONITOR only. Its password is SecretBackupPassword of the cluster's Secret.
	BackupUser           = "mysqlctl_backup"
	SecretBackupPassword = "backup-password"
	// backupDeadline bounds a backup Job's run; backupTTL keeps a finished one (and its logs).
	backupDeadline = int64(12 * 3600)
	backupTTL      = int32(24 * 3600)
)

// Bucket is where backups go, with the Secret that holds its credentials.
type Bucket struct {
	Endpoint, Region, Bucket, Prefix string
	PathStyle                        bool
	// SecretName names the Secret with BucketSecretAccessKey and BucketSecretSecretKey.
	SecretName string
}

// BackupJobOptions say which backup a Job takes, from where.
type BackupJobOptions struct {
	// ID is the backup's ID (backup.NewID).
	ID string
	// Source is the pod of the instance backed up: the Job runs on its node, with its data volume
	// and its server image.
	Source *corev1.Pod
	// AgentImage is mysqlctl's image (default DefaultAgentImage).
	AgentImage string
	Bucket     Bucket
}

// BackupJobName is the Job of backup id (lower case: a Job's name is a DNS label).
// A cluster name too long for the 63 characters of the job-name label is cut short: the ID's
// random suffix keeps the name unique.
func BackupJobName(c *v1.MysqlCluster, id string) string {
	suffix := "-backup-" + strings.ToLower(id)
	name := c.Name
	if len(name)+len(suffix) > 63 {
		name = strings.TrimRight(name[:max(0, 63-len(suffix))], "-.")
	}
	return name + suffix
}

// BuildBackupJob is the Job that takes backup o.ID of o.Source.
func BuildBackupJob(c *v1.MysqlCluster, o BackupJobOptions) (*batchv1.Job, error) {
	src := o.Source
	server := serverContainer(src)
	claim := dataClaim(src)
	switch {
	case server == nil:
		return nil, fmt.Errorf("pod %s has no %s container", src.Name, ContainerName)
	case claim == "":
		return nil, fmt.Errorf("pod %s mounts no volume claim at %s", src.Name, DataDir)
	case src.Spec.NodeName == "":
		return nil, fmt.Errorf("pod %s is not scheduled on a node", src.Name)
	}
	image := o.AgentImage
	if image == "" {
		image = DefaultAgentImage
	}
	labels := map[string]string{LabelInstance: c.Name, LabelManagedBy: FieldOwner, LabelComponent: BackupComponent}
	meta := ObjectMeta(c, BackupJobName(c, o.ID), BackupComponent)
	meta.Labels = labels
	backoff, deadline, ttl := int32(0), backupDeadline, backupTTL
	agent := AgentDir + "/mysqlctl"
	return &batchv1.Job{
		TypeMeta:   TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			// A failed backup is not retried by the Job: the operation reports it, and a new one is a
			// new backup.
			BackoffLimit:            &backoff,
			ActiveDeadlineSeconds:   &deadline,
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					// The source's node: its data volume is attached there (ReadWriteOnce).
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{src.Spec.NodeName}}},
						}}},
					}},
					Tolerations: src.Spec.Tolerations,
					Volumes: []corev1.Volume{
						{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}},
						{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					InitContainers: []corev1.Container{agentInstaller(image)},
					Containers: []corev1.Container{{
						Name:  BackupComponent,
						Image: server.Image,
						Command: append([]string{agent, "agent", "backup",
							"--id", o.ID, "--namespace", c.Namespace, "--cluster", c.Name, "--cluster-uid", string(c.UID),
							"--flavor", string(Flavor(c)), "--source", src.Name,
							"--host", PodHost(c, src.Name), "--port", strconv.Itoa(PodPort(src)), "--user", BackupUser,
							"--datadir", DataDir}, recipientArgs(c)...),
						Env: append(bucketEnv(o.Bucket), secretEnv("MYSQL_PWD", SecretName(c), SecretBackupPassword)),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: DataDir, ReadOnly: true},
							{Name: "agent", MountPath: AgentDir},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}, nil
}

// agentInstaller is the init container that copies mysqlctl, from its image, into the Job's
// "agent" volume, for the main container (of the server's image) to run.
func agentInstaller(image string) corev1.Container {
	return corev1.Container{
		Name:                     "agent",
		Image:                    image,
		Args:                     []string{"agent", "install-self", AgentDir + "/mysqlctl"},
		VolumeMounts:             []corev1.VolumeMount{{Name: "agent", MountPath: AgentDir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// bucketEnv is the agent's bucket: where in plain values, the credentials from their Secret.
func bucketEnv(b Bucket) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: backup.EnvBucket, Value: b.Bucket}}
	for _, kv := range [][2]string{{backup.EnvEndpoint, b.Endpoint}, {backup.EnvRegion, b.Region}, {backup.EnvPrefix, b.Prefix}} {
		if kv[1] != "" {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	if b.PathStyle {
		env = append(env, corev1.EnvVar{Name: backup.EnvPathStyle, Value: "true"})
	}
	return append(env,
		secretEnv(backup.EnvAccessKey, b.SecretName, BucketSecretAccessKey),
		secretEnv(backup.EnvSecretKey, b.SecretName, BucketSecretSecretKey))
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

// serverContainer is the pod's server container.
func serverContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == ContainerName {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// dataClaim is the claim the pod's server container mounts at DataDir.
func dataClaim(p *corev1.Pod) string {
	server := serverContainer(p)
	if server == nil {
		return ""
	}
	for _, m := range server.VolumeMounts {
		if m.MountPath != DataDir {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	return ""
}

// recipientArgs are the backup agent's --recipient flags: the public keys of
// spec.backup.encryption (public: they may be seen in the Job's spec).
func recipientArgs(c *v1.MysqlCluster) []string {
	var args []string
	if b := c.Spec.Backup; b != nil && b.Encryption != nil {
		for _, r := range b.Encryption.Recipients {
			args = append(args, "--recipient", r)
		}
	}
	return args
}

// RestoreIdentitySecretName is the Secret that holds, while a restore of an encrypted backup
// copies its data, the identity (private key) that decrypts it.
func RestoreIdentitySecretName(c *v1.MysqlCluster) string {
	return RestoreJobName(c) + "-identity"
}

// RestoreIdentityKey is the key of the identity file's text in that Secret.
const RestoreIdentityKey = "identity"
