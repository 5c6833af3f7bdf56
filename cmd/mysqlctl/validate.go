package main

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/crdschema"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// validateCluster checks a MysqlCluster as the user wrote it — JSON maps holding every value
// they set, zero values included — the way the API server will: it applies the CRD's
// defaults, then checks the CRD's schema and CEL rules (the CRD built into this binary). It
// returns the defaulted, typed cluster, or an ErrInvalid error with the API server's message.
func validateCluster(ctx context.Context, raw map[string]any) (*v1.MysqlCluster, error) {
	v, err := crdschema.Embedded()
	if err != nil {
		return nil, fmt.Errorf("the MysqlCluster CRD built into mysqlctl cannot be read: %w", err)
	}
	v.Default(raw)
	name, _, _ := unstructured.NestedString(raw, "metadata", "name")
	if errs := v.Validate(ctx, raw); len(errs) > 0 {
		return nil, outcome.Invalid(crdschema.Message(crdschema.Invalid(name, errs)) + " (nothing was created or changed)")
	}
	c := &v1.MysqlCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, c); err != nil {
		return nil, outcome.Invalid(fmt.Sprintf("MysqlCluster %q: %v", name, err))
	}
	return c, nil
}

// toRaw renders obj as the JSON maps the API server would decode from it.
func toRaw(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u.Object, nil
}
