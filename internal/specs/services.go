package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

func mysqlServicePort() []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name: "mysql", Port: MySQLPort, TargetPort: intstr.FromString("mysql"), Protocol: corev1.ProtocolTCP,
	}}
}

// BuildHeadlessService returns the StatefulSet's governing Service. It publishes not-ready
// addresses so instances can reach each other by name while they are still being joined.
func BuildHeadlessService(c *v1.MysqlCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   TypeMeta("v1", "Service"),
		ObjectMeta: ObjectMeta(c, HeadlessServiceName(c), "instances"),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(c),
			Ports:                    mysqlServicePort(),
		},
	}
}

// BuildPrimaryService returns the Service that selects the pod labelled primary.
func BuildPrimaryService(c *v1.MysqlCluster) *corev1.Service {
	sel := SelectorLabels(c)
	sel[LabelRole] = string(v1.RolePrimary)
	return &corev1.Service{
		TypeMeta:   TypeMeta("v1", "Service"),
		ObjectMeta: ObjectMeta(c, PrimaryServiceName(c), "primary"),
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: mysqlServicePort()},
	}
}

// BuildReplicaService returns the Service that selects replicas mysqlctl has labelled healthy.
func BuildReplicaService(c *v1.MysqlCluster) *corev1.Service {
	sel := SelectorLabels(c)
	sel[LabelRole] = string(v1.RoleReplica)
	return &corev1.Service{
		TypeMeta:   TypeMeta("v1", "Service"),
		ObjectMeta: ObjectMeta(c, ReplicaServiceName(c), "replicas"),
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: mysqlServicePort()},
	}
}
