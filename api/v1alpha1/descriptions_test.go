package v1alpha1_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// `kubectl explain mysqlcluster.spec.semiSync` shows the CRD's descriptions, which controller-gen
// copies from the doc comments in types.go and status.go. This test reads the generated CRDs in
// manifests/crd (so run `make generate` after editing a comment) and fails, naming its JSON path,
// on every property whose description a user cannot act on:
//
//   - no description, or one shorter than minDescriptionWords words;
//   - TODO, FIXME or XXX;
//   - Go leaking from the code: a description that starts with the property's Go field name
//     ("WaitForReplicas is …": kubectl users see json names), that names another exported Go
//     identifier of this package in CamelCase (a field such as LastSeen, a type such as
//     InstanceStatus, a constant such as PhaseRunning), a package-qualified identifier
//     (metav1.Duration), nil, or a kubebuilder marker that slipped into the text;
//   - a top-level status field that does not say it must not be edited by hand.
//
// The descriptions of list items and map values (which kubectl explain prints after the field's
// own) are held to the same rules when present. The root's apiVersion, kind and metadata are
// standard, and inside the fields that embed Kubernetes types (resources, conditions) the schema
// and its descriptions are upstream's: there a description must only be present and free of
// TODO.

const minDescriptionWords = 4

// allowedIdentifiers are exported Go identifiers of this package that are also words of the API
// a kubectl user sees.
var allowedIdentifiers = map[string]bool{"MysqlCluster": true}

func TestCRDDescriptions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "manifests", "crd", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no CRD in manifests/crd: run make generate")
	}
	idents := goIdentifiers(t)
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if crd.Spec.Names.Kind != "MysqlCluster" {
			t.Errorf("%s: kind %s has no Go type this test knows; teach it", file, crd.Spec.Names.Kind)
			continue
		}
		if len(crd.Spec.Versions) == 0 {
			t.Errorf("%s: no versions", file)
		}
		for _, ver := range crd.Spec.Versions {
			if ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
				t.Errorf("%s: version %s has no openAPIV3Schema", file, ver.Name)
				continue
			}
			w := &walker{idents: idents}
			root := ver.Schema.OpenAPIV3Schema
			w.check(ver.Name+": (root)", "", root.Description, false, true)
			w.walk(ver.Name+": ", *root, reflect.TypeFor[v1.MysqlCluster](), false, true)
			checked += w.checked
			for _, p := range w.problems {
				t.Error(p)
			}
		}
	}
	// Guards against a walk that silently finds nothing (a moved file, an empty schema).
	if checked < 100 {
		t.Errorf("only %d descriptions checked; expected the whole spec and status", checked)
	}
	t.Logf("%d descriptions checked in %d CRD file(s)", checked, len(files))
}

type walker struct {
	idents   map[string]bool
	problems []string
	checked  int
}

// walk checks every property of s (a schema of Go type typ) and descends into properties, list
// items and map values. upstream marks a subtree whose schema comes from another package (a
// Kubernetes type); root marks the top of the CRD.
func (w *walker) walk(path string, s apiextensionsv1.JSONSchemaProps, typ reflect.Type, upstream, root bool) {
	typ = deref(typ)
	var fields map[string]reflect.StructField
	if typ != nil && typ.Kind() == reflect.Struct {
		fields = jsonFields(typ)
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if root && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue // standard Kubernetes object fields
		}
		prop := s.Properties[name]
		p := path + name
		if path != "" && !strings.HasSuffix(path, ": ") {
			p = path + "." + name
		}
		var child reflect.Type
		goName := ""
		if f, ok := fields[name]; ok {
			child, goName = f.Type, f.Name
		} else if !upstream && fields != nil {
			w.problems = append(w.problems, fmt.Sprintf("%s: no Go field has json name %q: the CRD is stale, run make generate", p, name))
		}
		w.check(p, goName, prop.Description, upstream, false)
		if root && name == "status" {
			w.statusFields(p, prop)
		}
		w.walk(p, prop, child, upstream || foreign(child), false)
	}
	if s.Items != nil && s.Items.Schema != nil {
		var elem reflect.Type
		if typ != nil && typ.Kind() == reflect.Slice {
			elem = typ.Elem()
		}
		p := path + "[]"
		if d := s.Items.Schema.Description; d != "" {
			w.check(p, typeName(elem), d, upstream || foreign(elem), false)
		}
		w.walk(p, *s.Items.Schema, elem, upstream || foreign(elem), false)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		var elem reflect.Type
		if typ != nil && typ.Kind() == reflect.Map {
			elem = typ.Elem()
		}
		p := path + "{}"
		if d := s.AdditionalProperties.Schema.Description; d != "" {
			w.check(p, typeName(elem), d, upstream || foreign(elem), false)
		}
		w.walk(p, *s.AdditionalProperties.Schema, elem, upstream || foreign(elem), false)
	}
}

// statusFields requires every top-level status field to say that only mysqlctl writes it.
func (w *walker) statusFields(path string, status apiextensionsv1.JSONSchemaProps) {
	names := make([]string, 0, len(status.Properties))
	for name := range status.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.Contains(strings.ToLower(strings.Join(strings.Fields(status.Properties[name].Description), " ")), "do not edit") {
			w.problems = append(w.problems, fmt.Sprintf("%s.%s: a status field's description must say it is written by mysqlctl and not to edit it (\"do not edit\")", path, name))
		}
	}
}

var (
	wordRE      = regexp.MustCompile(`[A-Za-z][A-Za-z0-9_]*`)
	camelRE     = regexp.MustCompile(`[a-z0-9][A-Z]|[A-Z]{2}[a-z]`)
	qualifiedRE = regexp.MustCompile(`\b[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*\b`)
	todoRE      = regexp.MustCompile(`\b(TODO|FIXME|XXX)\b`)
	nilRE       = regexp.MustCompile(`\bnil\b`)
)

// check records what is wrong with the description d of the property at path, whose Go field
// (or, for list items, Go type) is goName.
func (w *walker) check(path, goName, d string, upstream, root bool) {
	w.checked++
	bad := func(format string, args ...any) {
		w.problems = append(w.problems, path+": "+fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(d) == "" {
		bad("no description")
		return
	}
	if m := todoRE.FindString(d); m != "" {
		bad("description contains %s: %q", m, d)
	}
	if upstream {
		return // upstream's wording, not ours to change
	}
	if n := len(strings.Fields(d)); n < minDescriptionWords {
		bad("description has %d word(s), want at least %d that say what it means and how to use it: %q", n, minDescriptionWords, d)
	}
	first := strings.Trim(strings.Fields(d)[0], "`'\"*_()[]:;,.")
	startsWithGo := !root && goName != "" && first == goName
	if startsWithGo {
		bad("description starts with the Go name %s; start with what the field is or does: %q", goName, firstLine(d))
	}
	var leaked []string
	for _, word := range wordRE.FindAllString(d, -1) {
		if startsWithGo && word == goName {
			continue // reported above
		}
		if w.idents[word] && !allowedIdentifiers[word] && !slices.Contains(leaked, word) {
			leaked = append(leaked, word)
		}
	}
	if len(leaked) > 0 {
		bad("description names Go identifier(s) %s; kubectl users see json names: %q", strings.Join(leaked, ", "), d)
	}
	if m := qualifiedRE.FindString(d); m != "" {
		bad("description names the Go identifier %s: %q", m, d)
	}
	if nilRE.MatchString(d) {
		bad("description says nil, a Go word; say absent or empty: %q", d)
	}
	if strings.Contains(d, "+kubebuilder") || strings.Contains(d, "+optional") || strings.Contains(d, "+listType") {
		bad("a marker leaked into the description (a marker line without its leading '+'?): %q", d)
	}
}

// goIdentifiers returns the exported CamelCase identifiers this package declares (types, struct
// fields, constants, variables, functions and methods): a description naming one talks Go.
func goIdentifiers(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	add := func(id *ast.Ident) {
		if id != nil && id.IsExported() && camelRE.MatchString(id.Name) {
			ids[id.Name] = true
		}
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				add(n.Name)
			case *ast.ValueSpec:
				for _, id := range n.Names {
					add(id)
				}
			case *ast.FuncDecl:
				add(n.Name)
			case *ast.Field:
				for _, id := range n.Names {
					add(id)
				}
			}
			return true
		})
	}
	if !ids["MysqlClusterSpec"] || !ids["WaitForReplicas"] {
		t.Fatalf("parsing the package found %d identifiers, not its types and fields", len(ids))
	}
	return ids
}

// jsonFields maps the json names of a struct's fields to the fields, following inline and
// embedded structs as encoding/json does.
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,") {
			if e := deref(f.Type); e.Kind() == reflect.Struct {
				for k, v := range jsonFields(e) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// foreign reports whether typ (or the struct it holds) is a struct declared outside this
// package, whose schema controller-gen copies from upstream.
func foreign(typ reflect.Type) bool {
	typ = deref(typ)
	for typ != nil && (typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map) {
		typ = deref(typ.Elem())
	}
	return typ != nil && typ.Kind() == reflect.Struct && typ.PkgPath() != reflect.TypeFor[v1.MysqlCluster]().PkgPath()
}

func deref(typ reflect.Type) reflect.Type {
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ
}

func typeName(typ reflect.Type) string {
	if typ = deref(typ); typ == nil {
		return ""
	}
	return typ.Name()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
