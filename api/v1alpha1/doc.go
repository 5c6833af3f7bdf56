// Package v1alpha1 holds the MysqlCluster API (group mysqlctl.io, version v1alpha1).
//
// The types carry kubebuilder markers; the CRD in manifests/crd and zz_generated.deepcopy.go
// are generated from them with controller-gen (`make generate`). Validation lives in the CRD as
// OpenAPI constraints and CEL rules, so the API server itself refuses bad input whichever client
// sends it; Default fills the values that depend on other fields (service names, flavor) before a
// client creates the object.
//
// +kubebuilder:object:generate=true
// +groupName=mysqlctl.io
package v1alpha1
