package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Paths inside the pod. Both official images read /etc/mysql/conf.d/*.cnf and keep data in
// /var/lib/mysql.
const (
	DataDir        = "/var/lib/mysql"
	ConfDir        = "/etc/mysql/conf.d"
	ConfigMountDir = "/mnt/mysqlctl-config"
	// ServerIDBase is added to the ordinal to form server_id (0 is not a valid replication
	// server_id, and a recognisable base makes foreign server ids stand out in GTIDs).
	ServerIDBase = 1000
	// AnnotationConfigHash on the pod template records the my.cnf the pods were started with.
	AnnotationConfigHash = "mysqlctl.io/config-hash"
	// ContainerName is the server container.
	ContainerName = "mysql"
)

// FlavorTools are the per-flavor names the official images use.
type FlavorTools struct {
	RootPasswordEnv string
	Client, Admin   string
	// Dump is the logical backup tool a seed Job copies a donor with.
	Dump string
	// Env is what else the image's entrypoint is told: MariaDB's upgrades the system tables
	// (mariadb-upgrade) when the data directory was last used by another version, before the
	// server starts; MySQL 8.0.16 and later upgrade themselves at startup.
	Env []corev1.EnvVar
}

// Flavor is the cluster's flavor: spec.flavor, else the one its image's name says.
func Flavor(c *v1.MysqlCluster) v1.Flavor {
	if c.Spec.Flavor != "" {
		return c.Spec.Flavor
	}
	return v1.FlavorFromImage(c.Spec.Image)
}

func ToolsFor(c *v1.MysqlCluster) FlavorTools {
	if Flavor(c) == v1.FlavorMariaDB {
		// MariaDB 11 images no longer ship the mysql* names.
		return FlavorTools{RootPasswordEnv: "MARIADB_ROOT_PASSWORD", Client: "mariadb", Admin: "mariadb-admin", Dump: "mariadb-dump",
			Env: []corev1.EnvVar{{Name: "MARIADB_AUTO_UPGRADE", Value: "1"}}}
	}
	return FlavorTools{RootPasswordEnv: "MYSQL_ROOT_PASSWORD", Client: "mysql", Admin: "mysqladmin", Dump: "mysqldump"}
}

// initScript derives server_id from the pod's ordinal (the hostname's last '-' field) and
// assembles conf.d from the ConfigMap, as the Kubernetes replicated-MySQL StatefulSet example does.
func initScript(c *v1.MysqlCluster) string {
	return fmt.Sprintf(`set -eu
ordinal="${HOSTNAME##*-}"
case "$ordinal" in ''|*[!0-9]*) echo "mysqlctl: cannot derive the ordinal from hostname $HOSTNAME" >&2; exit 1;; esac
cp %[1]s/%[2]s %[3]s/%[2]s
printf '[mysqld]\nserver_id = %%d\nreport_host = %%s\n' "$((%[4]d + ordinal))" "$HOSTNAME.%[5]s" > %[3]s/server-id.cnf
`, ConfigMountDir, ConfigFileName, ConfDir, ServerIDBase, HeadlessServiceName(c))
}

// readinessCommand is Ready only for the server that serves clients (as root over the local
// socket; the password travels in MYSQL_PWD, never on the command line, where ps would show it): the image entrypoint's
// temporary server, which initialises an empty datadir, answers on the socket too but runs with
// skip_networking, and a pod must not be Ready (nor bootstrap connect to it) until the real
// server listens on the network. readySQL fails there, so the client's exit status is the
// answer: the shell only sets MYSQL_PWD and execs the client (no subshell, no second process).
func readinessCommand(t FlavorTools) []string {
	return []string{"sh", "-c", fmt.Sprintf(`MYSQL_PWD="$%s" exec %s --protocol=socket -uroot -N -B -e '%s'`, t.RootPasswordEnv, t.Client, readySQL)}
}

// readySQL succeeds only on a server with networking on: with skip_networking the scalar
// subquery returns two rows, an error (1242, measured on MariaDB; MySQL documents the same
// ER_SUBQUERY_NO_1_ROW for it).
const readySQL = "SELECT (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE @@skip_networking)"

// BuildStatefulSet returns the StatefulSet. The rolling-update partition starts at the replica
// count so no template change ever rolls a pod by itself: the upgrade operation lowers it one
// pod at a time (status.upgrade.partition) only while the cluster is proven healthy.
func BuildStatefulSet(c *v1.MysqlCluster) (*appsv1.StatefulSet, error) {
	cnf, err := RenderMyCnf(c)
	if err != nil {
		return nil, err
	}
	size, err := resource.ParseQuantity(storageSize(c))
	if err != nil {
		return nil, fmt.Errorf("spec.storage.size %q: %w", storageSize(c), err)
	}
	t := ToolsFor(c)
	startup, readiness, liveness := probes(t)
	replicas := c.Spec.Replicas
	if replicas == 0 {
		replicas = 3
	}
	if sc := c.Status.Scale; sc != nil && sc.Replicas > 0 {
		// A scale in progress moves the StatefulSet one instance at a time.
		replicas = sc.Replicas
	}
	if RestorePending(c) {
		// No server may start on the first volume before the backup is in it.
		replicas = 0
	}
	partition := replicas
	grace := int64(60)
	fsGroup := int64(999)
	noLinks := false
	sel := SelectorLabels(c)
	rootPassword := corev1.EnvVar{Name: t.RootPasswordEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(c)}, Key: SecretRootPassword,
	}}}
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: DataDir}, {Name: "conf", MountPath: ConfDir}}

	sts := &appsv1.StatefulSet{
		TypeMeta:   TypeMeta("apps/v1", "StatefulSet"),
		ObjectMeta: ObjectMeta(c, StatefulSetName(c), "database"),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: HeadlessServiceName(c),
			// Parallel: ordinals carry no role, and OrderedReady would hold back recreating a
			// deleted pod (possibly the primary's) while any lower ordinal is not Ready. Nothing
			// depends on start order: the init container needs only the pod's own hostname, and
			// replicas follow their primary by its stable DNS name (PodHost), not by ordinal.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: sel},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      LabelsWith(c, "database"),
					Annotations: map[string]string{AnnotationConfigHash: configHash(cnf)},
				},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					EnableServiceLinks:            &noLinks,
					SecurityContext:               &corev1.PodSecurityContext{FSGroup: &fsGroup},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								TopologyKey:   corev1.LabelHostname,
								LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
							},
						}},
					}},
					InitContainers: []corev1.Container{{
						Name:    "init-config",
						Image:   c.Spec.Image,
						Command: []string{"sh", "-c", initScript(c)},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "conf", MountPath: ConfDir},
							{Name: "config", MountPath: ConfigMountDir, ReadOnly: true},
						},
					}},
					Containers: []corev1.Container{{
						Name:           ContainerName,
						Image:          c.Spec.Image,
						Env:            append([]corev1.EnvVar{rootPassword}, t.Env...),
						Ports:          containerPorts(c),
						VolumeMounts:   mounts,
						Resources:      c.Spec.Resources,
						StartupProbe:   startup,
						ReadinessProbe: readiness,
						LivenessProbe:  liveness,
					}},
					Volumes: []corev1.Volume{
						{Name: "conf", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(c, cnf)},
						}}},
					},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: SelectorLabels(c)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: c.Spec.Storage.StorageClassName,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				},
			}},
		},
	}
	// The partition an upgrade lowered holds only for the template that upgrade rolls out: a
	// template changed meanwhile (a new image or configuration applied in the middle) gets
	// partition = replicas, so it restarts nothing, the primary included, until the upgrade
	// adopts it in its Preparing stage.
	if up := c.Status.Upgrade; up != nil && up.Partition != nil && up.TemplateHash == StatefulSetTemplateHash(sts) {
		partition = *up.Partition
	}
	return sts, nil
}

// templateHash identifies a pod template.
func StatefulSetTemplateHash(sts *appsv1.StatefulSet) string {
	b, err := json.Marshal(sts.Spec.Template)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// TemplateHash is the hash of the pod template the cluster's spec makes (status.upgrade records
// the one an upgrade rolls out).
func TemplateHash(c *v1.MysqlCluster) (string, error) {
	sts, err := BuildStatefulSet(c)
	if err != nil {
		return "", err
	}
	return StatefulSetTemplateHash(sts), nil
}

func storageSize(c *v1.MysqlCluster) string {
	if c.Spec.Storage.Size != "" {
		return c.Spec.Storage.Size
	}
	return "10Gi"
}

// probes returns the database container's startup, readiness and liveness probes.
func probes(t FlavorTools) (startup, readiness, liveness *corev1.Probe) {
	// Started means the server listens for clients: the entrypoint's temporary
	// init server runs with networking off, so the port opens only for the
	// server that serves. A TCP connect from the node costs no process, so it
	// runs every second and a starting pod is Ready about a second after its
	// server is; it allows an hour (crash recovery of a large data set) before
	// the kubelet gives up on the container.
	startup = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("mysql")}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		FailureThreshold: 3600,
		SuccessThreshold: 1,
	}
	// Ready means the server answers SQL with networking on (not the entrypoint's temporary
	// init server); whether it replicates correctly is proven separately by mysqlctl from
	// replication evidence. It runs once the startup probe has passed (at once, so a started
	// pod is Ready within about a second), then every 10 s. An exec probe costs a container
	// exec (one new process, which becomes the shell, then the client) and a client login on
	// the server per pod each time: at every 5 s, with a subshell, the probes of 90 pods kept
	// this project's 2-core test machine busy creating processes (45 a second) and slowed
	// everything else on it, as they would crowd a real node. A server that exits is
	// not ready at once (its container stopped); one that stops answering leaves the Services
	// 12-22 s later (two failed probes 10 s apart, 2 s timeout), plus the endpoints' sync. The
	// supervisor checks the primary over SQL, not through readiness, and routing follows the
	// role labels it moves; but a replica that is not Ready counts as unreachable to a failover
	// (it blocks the receiver fence), and after a failed probe it is Ready again only at the
	// next one, up to 10 s later.
	readiness = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: readinessCommand(t)}},
		PeriodSeconds:    10,
		TimeoutSeconds:   2,
		FailureThreshold: 2,
		SuccessThreshold: 1,
	}
	// Alive means the process answers at all (ping succeeds even when access is denied, so it
	// needs no password and no shell); it runs once the startup probe has passed, every 20 s,
	// and is generous, so a busy server is not killed: a server is restarted only after it has
	// answered no ping for at least 65 s (three failed probes after a last good one, then a 5 s
	// timeout), about 85 s at most.
	liveness = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{t.Admin, "--protocol=socket", "ping"}}},
		PeriodSeconds:    20,
		TimeoutSeconds:   5,
		FailureThreshold: 4,
		SuccessThreshold: 1,
	}
	return startup, readiness, liveness
}

// containerPorts declares the server's port and, where the servers serve it, the admin port
// (PodPort reads it back from a pod).
func containerPorts(c *v1.MysqlCluster) []corev1.ContainerPort {
	ports := []corev1.ContainerPort{{Name: "mysql", ContainerPort: MySQLPort, Protocol: corev1.ProtocolTCP}}
	if adminPortServed(c) {
		ports = append(ports, corev1.ContainerPort{Name: AdminPortName, ContainerPort: AdminPort, Protocol: corev1.ProtocolTCP})
	}
	return ports
}
