package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every type in this package.
var GroupVersion = schema.GroupVersion{Group: "mysqlctl.io", Version: "v1alpha1"}

// Resource is the plural resource name of MysqlCluster, as used in REST paths and RBAC rules.
const Resource = "mysqlclusters"

// GroupVersionResource returns the MysqlCluster resource, for dynamic clients and RBAC.
func GroupVersionResource() schema.GroupVersionResource {
	return GroupVersion.WithResource(Resource)
}

// AddToScheme registers the MysqlCluster types with a runtime scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MysqlCluster{}, &MysqlClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
