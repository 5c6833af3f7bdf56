// Package crdschema validates a MysqlCluster on this machine the way the API server does: it
// applies the CRD's structural defaults, then checks the OpenAPI schema and the CEL rules
// (x-kubernetes-validations) of the CRD embedded in this binary, with the apiextensions
// libraries the API server itself runs. Errors carry the API server's own field paths and
// messages, so `create --dry-run=client` refuses exactly what `create` would be refused.
package crdschema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/manifests"
)

// crdFile is the generated CRD inside manifests.FS.
const crdFile = "crd/mysqlctl.io_mysqlclusters.yaml"

// Validator checks MysqlCluster objects against one CRD version's schema.
type Validator struct {
	structural *structuralschema.Structural
	openapi    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	embedded     *Validator
	embeddedErr  error
	embeddedOnce sync.Once
)

// Embedded returns the validator of the CRD this binary installs (built once).
func Embedded() (*Validator, error) {
	embeddedOnce.Do(func() {
		data, err := fs.ReadFile(manifests.FS, crdFile)
		if err != nil {
			embeddedErr = err
			return
		}
		embedded, embeddedErr = New(data, v1.GroupVersion.Version)
	})
	return embedded, embeddedErr
}

// New builds a validator from a CRD manifest (YAML) for the named version.
func New(crdYAML []byte, version string) (*Validator, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	var props *apiextensionsv1.JSONSchemaProps
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i]; v.Name == version && v.Schema != nil {
			props = v.Schema.OpenAPIV3Schema
		}
	}
	if props == nil {
		return nil, fmt.Errorf("CRD %s has no schema for version %s", crd.Name, version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		return nil, fmt.Errorf("convert CRD schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("CRD schema is not structural: %w", err)
	}
	openapi, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("CRD schema: %w", err)
	}
	return &Validator{
		structural: structural,
		openapi:    openapi,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// Default applies the schema's defaults to obj (a JSON object as maps), as the API server does
// when it decodes a request.
func (v *Validator) Default(obj map[string]any) { defaulting.Default(obj, v.structural) }

// Validate checks a new object (already defaulted) against the schema and its CEL rules, in the
// API server's order: CEL rules run only when the schema checks leave them something to check.
func (v *Validator) Validate(ctx context.Context, obj map[string]any) field.ErrorList {
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.openapi)
	if blocking(errs) {
		return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	if v.cel != nil {
		celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// blocking reports errors after which the API server does not evaluate CEL rules.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// Invalid is the error the API server returns for these field errors: its message reads
// `MysqlCluster.mysqlctl.io "NAME" is invalid: …`.
func Invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: "MysqlCluster"}, name, errs)
}

// Message is the text of an Invalid error (the API server's status message), or err's own.
func Message(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
