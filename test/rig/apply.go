package rig

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// MariaDBManifest is a plain three-instance MariaDB StatefulSet named "mariadb" with its headless
// Service, Secret and ConfigMap (manifests/mariadb.yaml): what a real cluster runs with the official
// image, used by the rig's tests and by `make demo` before `mysqlctl create` exists.
//
//go:embed manifests/mariadb.yaml
var MariaDBManifest []byte

// FieldManager is the server-side apply field manager of Apply.
const FieldManager = "mysqlctl-rig"

// Apply server-side applies every object of a multi-document YAML stream; namespaced objects
// without a namespace go to namespace (default "default"), which is created when missing.
func Apply(ctx context.Context, cfg *rest.Config, namespace string, manifest []byte) error {
	if namespace == "" {
		namespace = "default"
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nsObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace},
	}}
	if err := applyOne(ctx, dyn, mapper, nsObj); err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		if err := applyOne(ctx, dyn, mapper, &obj); err != nil {
			return err
		}
	}
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("")
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}
