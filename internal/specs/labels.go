package specs

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Label keys mysqlctl sets.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	// LabelRole is set on pods by mysqlctl: "primary" on the one writable instance, "replica" on
	// replicas proven healthy, "quarantined" on instances kept out of service. The primary and
	// replica Services select on it, so moving the label moves the traffic.
	LabelRole = "mysqlctl.io/role"
)

// FieldOwner is the server-side apply field manager of every object mysqlctl writes.
const FieldOwner = "mysqlctl"

// MySQLPort is the server port.
const MySQLPort = 3306

// AdminPort is the server's second port, for mysqlctl and replication only: MariaDB's extra_port
// (with its own extra_max_connections) and MySQL's administrative interface. A primary whose
// sessions fill max_connections (commits piling up while no replica acknowledges them) still
// lets its replicas and mysqlctl in through it. AdminPortName names it in the pod template.
const (
	AdminPort     = 33062
	AdminPortName = "mysql-admin"
	// adminMaxConnections is MariaDB's extra_max_connections: the supervisor's pools, an
	// operation's sessions and every replica's IO thread fit with room to spare.
	adminMaxConnections = 64
)

// PodPort is the port mysqlctl and replication reach a pod's server on: the admin port when the
// pod's template declares it (pods created before it existed serve only MySQLPort).
func PodPort(pod *corev1.Pod) int {
	if pod != nil {
		for _, ctr := range pod.Spec.Containers {
			if ctr.Name != ContainerName {
				continue
			}
			for _, p := range ctr.Ports {
				if p.Name == AdminPortName {
					return int(p.ContainerPort)
				}
			}
		}
	}
	return MySQLPort
}

// SelectorLabels select every instance of the cluster.
func SelectorLabels(c *v1.MysqlCluster) map[string]string {
	return map[string]string{LabelName: "mysql", LabelInstance: c.Name, LabelManagedBy: FieldOwner}
}

func LabelsWith(c *v1.MysqlCluster, component string) map[string]string {
	l := SelectorLabels(c)
	l[LabelComponent] = component
	return l
}

// StatefulSetName names the cluster's StatefulSet (its pods are NAME-0, NAME-1, …).
func StatefulSetName(c *v1.MysqlCluster) string { return c.Name }

// HeadlessServiceName names the governing Service of the StatefulSet, which gives each pod a
// stable DNS name (<pod>.<headless>.<namespace>.svc).
func HeadlessServiceName(c *v1.MysqlCluster) string { return c.Name + "-instances" }

// ConfigMapName names the ConfigMap holding the my.cnf cnf: one per configuration, named by
// its content, so that a pod reads the configuration of the template revision it was made from
// (a pod recreated at an older revision never starts with a newer revision's options).
func ConfigMapName(c *v1.MysqlCluster, cnf string) string {
	return c.Name + "-config-" + configHash(cnf)
}

// PrimaryServiceName is spec.primaryService or its default.
func PrimaryServiceName(c *v1.MysqlCluster) string {
	if c.Spec.PrimaryService != "" {
		return c.Spec.PrimaryService
	}
	return c.Name + "-primary"
}

// ReplicaServiceName is spec.replicaService or its default.
func ReplicaServiceName(c *v1.MysqlCluster) string {
	if c.Spec.ReplicaService != "" {
		return c.Spec.ReplicaService
	}
	return c.Name + "-replicas"
}

// SecretName is spec.credentialsSecretName or its default.
func SecretName(c *v1.MysqlCluster) string {
	if c.Spec.CredentialsSecretName != "" {
		return c.Spec.CredentialsSecretName
	}
	return c.Name + "-credentials"
}

// ownerRef makes the cluster the controller owner, so deleting it garbage-collects what it owns
// (PersistentVolumeClaims excepted: the StatefulSet retains them).
func ownerRef(c *v1.MysqlCluster) []metav1.OwnerReference {
	t := true
	return []metav1.OwnerReference{{
		APIVersion:         v1.GroupVersion.String(),
		Kind:               "MysqlCluster",
		Name:               c.Name,
		UID:                c.UID,
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}}
}

func ObjectMeta(c *v1.MysqlCluster, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       c.Namespace,
		Labels:          LabelsWith(c, component),
		OwnerReferences: ownerRef(c),
	}
}
