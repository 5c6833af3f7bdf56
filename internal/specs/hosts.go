package specs

import (
	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// PodHost returns the stable DNS name of one of the cluster's pods,
// <pod>.<headless Service>.<namespace>.svc, which the cluster DNS resolves to the pod's current
// address through the StatefulSet's governing (headless) Service. A pod recreated with a new IP
// keeps its name, so a replica pointed at PodHost of its primary reconnects to the new address by
// itself. The name stops before the cluster domain: the pods' DNS search path completes it
// (whatever the cluster domain is), and it names the namespace, so it resolves from any pod of
// the cluster. pod is the pod's name, which for a StatefulSet pod is also its spec.hostname.
func PodHost(c *v1.MysqlCluster, pod string) string {
	return pod + "." + HeadlessServiceName(c) + "." + c.Namespace + ".svc"
}
