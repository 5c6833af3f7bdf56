package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/manifests"
)

// FieldOwner is the server-side apply field manager of every object mysqlctl writes.
const FieldOwner = "mysqlctl"

// InstallOptions holds the install command's flags.
type InstallOptions struct {
	f *cmdutil.Factory

	RBAC      bool
	DryRun    cmdutil.DryRun
	Timeout   time.Duration
	Namespace string
}

// NewCmdInstall applies the CRD (and optionally the RBAC set) with server-side apply.
func NewCmdInstall(f *cmdutil.Factory, runF func(*InstallOptions) error) *cobra.Command {
	o := &InstallOptions{f: f}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the MysqlCluster CRD (and optionally RBAC) into the cluster",
		Long: `Install applies the MysqlCluster CustomResourceDefinition with server-side apply and waits until
the API server has established it. Running it again changes nothing unless this version of
mysqlctl carries a different CRD.

With --rbac it also applies, into the namespace given by -n, a ServiceAccount, Role and
RoleBinding named mysqlctl with exactly the permissions the CLI uses there (see
manifests/rbac/README.md), for CI jobs and an in-cluster "watch".

Installing the CRD needs permission to create customresourcedefinitions (cluster-admin, once).`,
		Example: example(f,
			"# Install the CRD and wait until it is established",
			"%[1]s install",
			"# Also create the ServiceAccount and Role a CI job uses in namespace db",
			"%[1]s install --rbac -n db",
			"# Show what would be applied",
			"%[1]s install --rbac --dry-run",
			"# Ask the API server what would change (it validates, stores nothing)",
			"%[1]s install --dry-run=server"),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.RBAC, "rbac", false, "Also apply the namespaced ServiceAccount, Role and RoleBinding")
	cmdutil.AddDryRunFlag(cmd, &o.DryRun, "Change nothing: client prints the objects that would be applied, server sends them with dryRun=All "+
		"and says what each would be (created, configured, unchanged); a bare --dry-run means client", cmdutil.DryRunServer)
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "How long to wait for the CRD to be established")
	cmdutil.MarkConfigurable(cmd.Flags(), "timeout")
	return cmd
}

// Complete resolves the namespace (only needed with --rbac).
func (o *InstallOptions) Complete() error {
	if !o.RBAC {
		return nil
	}
	if ns := *o.f.ConfigFlags.Namespace; ns != "" {
		// -n given: no need to read a kubeconfig (which --dry-run must not require).
		o.Namespace = ns
		return nil
	}
	ns, err := o.f.Namespace()
	o.Namespace = ns
	return err
}

// Validate checks the flags.
func (o *InstallOptions) Validate() error {
	if o.Timeout <= 0 {
		return cmdutil.FlagErrorf("--timeout must be positive, got %s", o.Timeout)
	}
	return nil
}

// Objects returns what install applies, in order: the CRD, then (with --rbac) the
// ServiceAccount, Role and RoleBinding placed in the namespace.
func (o *InstallOptions) Objects() ([]*unstructured.Unstructured, error) {
	objs, err := readManifests("crd")
	if err != nil {
		return nil, err
	}
	if !o.RBAC {
		return objs, nil
	}
	rbac, err := readManifests("rbac")
	if err != nil {
		return nil, err
	}
	order := map[string]int{"ServiceAccount": 0, "Role": 1, "RoleBinding": 2}
	sort.SliceStable(rbac, func(i, j int) bool { return order[rbac[i].GetKind()] < order[rbac[j].GetKind()] })
	for _, obj := range rbac {
		obj.SetNamespace(o.Namespace)
		if obj.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
			for _, s := range subjects {
				if m, ok := s.(map[string]any); ok {
					m["namespace"] = o.Namespace
				}
			}
			if err := unstructured.SetNestedSlice(obj.Object, subjects, "subjects"); err != nil {
				return nil, err
			}
		}
	}
	return append(objs, rbac...), nil
}

// readManifests decodes every YAML document of the embedded directory dir.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(manifests.FS, dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries {
		if path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := fs.ReadFile(manifests.FS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("embedded manifest %s/%s: %w", dir, e.Name(), err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// Run applies the objects, then waits for the CRD to be established.
func (o *InstallOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	objs, err := o.Objects()
	if err != nil {
		return err
	}
	ios := o.f.IOStreams
	if o.DryRun == cmdutil.DryRunClient {
		for i, obj := range objs {
			b, err := yaml.Marshal(obj.Object)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(ios.Out, "---")
			}
			if _, err := ios.Out.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	cfg, err := o.f.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		result, err := applyObject(ctx, dyn, obj, o.DryRun == cmdutil.DryRunServer)
		if err != nil {
			return err
		}
		fmt.Fprintf(ios.Out, "%s %s\n", describeObject(obj), result)
	}
	if o.DryRun == cmdutil.DryRunServer {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := waitEstablished(ctx, cfg, obj.GetName(), func() {
			fmt.Fprintf(ios.ErrOut, "waiting for %s to be established…\n", describeObject(obj))
		}); err != nil {
			return err
		}
	}
	return nil
}

// gvr maps the kinds install applies to their resources.
func gvr(obj *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	resource := map[string]string{
		"CustomResourceDefinition": "customresourcedefinitions",
		"ServiceAccount":           "serviceaccounts",
		"Role":                     "roles",
		"RoleBinding":              "rolebindings",
	}[obj.GetKind()]
	if resource == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("install cannot apply kind %s", obj.GetKind())
	}
	return gv.WithResource(resource), nil
}

func describeObject(obj *unstructured.Unstructured) string {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	kind := obj.GetKind()
	if gv.Group != "" {
		kind += "." + gv.Group
	}
	return fmt.Sprintf("%s/%s", strings.ToLower(kind), obj.GetName())
}

// applyObject server-side applies obj and reports "created", "configured" or "unchanged"
// (the resourceVersion stays the same when the apply changed nothing). With dryRun the API
// server validates and stores nothing, and the report says so.
func applyObject(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured, dryRun bool) (string, error) {
	r, err := gvr(obj)
	if err != nil {
		return "", err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(r)
	if ns := obj.GetNamespace(); ns != "" {
		ri = dyn.Resource(r).Namespace(ns)
	}
	before := ""
	live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case err == nil:
		before = live.GetResourceVersion()
	case apierrors.IsNotFound(err):
	default:
		return "", explainAPIError(err, "get", obj)
	}
	opts := metav1.ApplyOptions{FieldManager: FieldOwner, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	after, err := ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return "", explainAPIError(err, "apply", obj)
	}
	result := "configured"
	switch {
	case before == "":
		result = "created"
	case dryRun && sameStored(live, after):
		result = "unchanged"
	case !dryRun && before == after.GetResourceVersion():
		result = "unchanged"
	}
	if dryRun {
		result += " (server dry run)"
	}
	return result, nil
}

// sameStored reports whether a dry-run apply's answer equals the live object, apart from the
// fields the server maintains.
func sameStored(live, after *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		for _, f := range []string{"resourceVersion", "managedFields", "generation"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		delete(c.Object, "status")
		return c.Object
	}
	return equality.Semantic.DeepEqual(strip(live), strip(after))
}

// explainAPIError turns permission errors into a sentence that names the verb and resource.
func explainAPIError(err error, verb string, obj *unstructured.Unstructured) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("not allowed to %s %s: %w (ask a cluster administrator for this permission, or run install with an admin kubeconfig)", verb, describeObject(obj), err)
	}
	return fmt.Errorf("%s %s: %w", verb, describeObject(obj), err)
}

// waitEstablished waits until the CRD reports Established and NamesAccepted.
func waitEstablished(ctx context.Context, cfg *rest.Config, name string, onWait func()) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ri := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	announced := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				return err
			}
			if crdCondition(crd, apiextensionsv1.Established) && crdCondition(crd, apiextensionsv1.NamesAccepted) {
				return nil
			}
		} else if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return err
		}
		if !announced {
			onWait()
			announced = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s was not established in time: %w", name, outcome.ErrTimedOut)
		case <-tick.C:
		}
	}
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
