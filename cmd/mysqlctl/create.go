package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// CreateOptions holds the create command's flags.
type CreateOptions struct {
	f *cmdutil.Factory

	Name      string
	Namespace string
	File      string
	DryRun    cmdutil.DryRun
	Output    string

	Image             string
	Flavor            string
	Replicas          int32
	StorageSize       string
	StorageClass      string
	PrimaryService    string
	ReplicaService    string
	CredentialsSecret string
	MysqlConfig       []string
	SemiSync          bool
	SemiSyncWaitFor   int32
	SemiSyncTimeout   time.Duration
	AutoFailover      bool
	DetectionInterval time.Duration
	FailureThreshold  int32
	Cooldown          time.Duration
	MaxCandidateLag   time.Duration
	Requests          map[string]string
	Limits            map[string]string
	Paused            bool

	Wait    bool
	Timeout time.Duration
	Dialer  string

	// Cluster is the object to create, built by Complete.
	Cluster *v1.MysqlCluster
	// specFlags are the spec flags given on the command line (they conflict with -f).
	specFlags []string
}

// specFlagNames are the flags that set spec fields.
var specFlagNames = []string{
	"image", "flavor", "replicas", "storage-size", "storage-class", "primary-service", "replica-service",
	"credentials-secret", "mysql-config", "semi-sync", "semi-sync-wait-for", "semi-sync-timeout", "auto-failover", "detection-interval",
	"failure-threshold", "cooldown", "max-candidate-lag", "requests", "limits", "paused",
}

// NewCmdCreate creates a MysqlCluster and its derived objects.
func NewCmdCreate(f *cmdutil.Factory, runF func(*CreateOptions) error) *cobra.Command {
	o := &CreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create NAME [flags] | create -f FILE",
		Short: "Create a MySQL cluster",
		Long: `Create a MysqlCluster and the objects it owns: the credentials Secret (random passwords from a
secure source, unless a complete Secret of that name already exists), the my.cnf ConfigMap, a
headless Service, the primary and replica Services, a PodDisruptionBudget and the StatefulSet.

The spec comes from flags or from a file (-f), never both. The API server validates it before
anything is created; if any step fails, what was created is removed again.

The credentials Secret and the data volumes are not deleted with the cluster: retained data can
only be opened with its passwords. "delete --delete-data" removes both.`,
		Example: example(f,
			"# A three-instance MariaDB cluster",
			"%[1]s create demo --image mariadb:10.11 --replicas 3",
			"# From a file",
			"%[1]s create -f manifests/examples/demo.yaml",
			"# Extra my.cnf options",
			"%[1]s create shop --image mysql:8.4 --mysql-config max_connections=500 --mysql-config innodb_buffer_pool_size=2G",
			"# Print the objects that would be created, change nothing",
			"%[1]s create demo --image mariadb:10.11 --dry-run",
			"# The same, validated and defaulted by the API server (nothing is stored)",
			"%[1]s create demo --image mariadb:10.11 --dry-run=server -o json"),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.FlagErrorf("create takes one NAME, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Name = args[0]
			}
			for _, n := range specFlagNames {
				if cmd.Flags().Changed(n) {
					o.specFlags = append(o.specFlags, "--"+n)
				}
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.File, "filename", "f", "", "Read the MysqlCluster from this YAML file")
	cmdutil.AddDryRunFlag(cmd, &o.DryRun, "Print the objects that would be created (passwords are never printed) and change nothing: "+
		"client validates them on this machine against the CRD's schema and rules, server has the API server validate and default them (dryRun=All); a bare --dry-run means client", cmdutil.DryRunServer)
	fl.StringVarP(&o.Output, "output", "o", "yaml", "Format of --dry-run output: yaml or json")
	fl.StringVar(&o.Image, "image", "mysql:8.4", "Server image, for example mysql:8.4 or mariadb:10.11")
	fl.StringVar(&o.Flavor, "flavor", "", "mysql or mariadb (default: from the image's repository name)")
	fl.Int32Var(&o.Replicas, "replicas", 3, "Number of instances, primary included (1-64)")
	fl.StringVar(&o.StorageSize, "storage-size", "10Gi", "Volume size per instance")
	fl.StringVar(&o.StorageClass, "storage-class", "", "StorageClass of the volumes (default: the cluster's default)")
	fl.StringVar(&o.PrimaryService, "primary-service", "", "Name of the Service that selects the primary (default NAME-primary; immutable)")
	fl.StringVar(&o.ReplicaService, "replica-service", "", "Name of the Service that selects healthy replicas (default NAME-replicas; immutable)")
	fl.StringVar(&o.CredentialsSecret, "credentials-secret", "", "Name of the credentials Secret (default NAME-credentials; immutable)")
	fl.StringArrayVar(&o.MysqlConfig, "mysql-config", nil, "Extra my.cnf option KEY=VALUE for [mysqld] (repeatable)")
	fl.BoolVar(&o.SemiSync, "semi-sync", true, "Semi-synchronous replication (what makes failover lose no acknowledged commit)")
	fl.Int32Var(&o.SemiSyncWaitFor, "semi-sync-wait-for", 1, "Replicas that must acknowledge each commit")
	fl.DurationVar(&o.SemiSyncTimeout, "semi-sync-timeout", 24*time.Hour, "How long the primary waits for acknowledgements before falling back to asynchronous")
	fl.BoolVar(&o.AutoFailover, "auto-failover", true, "Let 'watch' fail over automatically")
	fl.DurationVar(&o.DetectionInterval, "detection-interval", time.Second, "How often 'watch' checks every instance")
	fl.Int32Var(&o.FailureThreshold, "failure-threshold", 3, "Consecutive failed checks, agreed by the replicas, that declare the primary dead")
	fl.DurationVar(&o.Cooldown, "cooldown", 5*time.Minute, "Minimum time between two automatic failovers")
	fl.DurationVar(&o.MaxCandidateLag, "max-candidate-lag", 30*time.Second, "Largest replication lag a failover candidate may have")
	fl.StringToStringVar(&o.Requests, "requests", nil, "Server container resource requests, for example cpu=500m,memory=1Gi")
	fl.StringToStringVar(&o.Limits, "limits", nil, "Server container resource limits, for example memory=2Gi")
	fl.BoolVar(&o.Paused, "paused", false, "Create paused: no automatic actions")
	addBootstrapWaiting(cmd, &o.Wait, false, &o.Timeout, 10*time.Minute)
	addDialerFlag(cmd, &o.Dialer)
	cmdutil.MarkConfigurable(fl, "image", "storage-class")
	return cmd
}

// Validate checks the command line (pure).
func (o *CreateOptions) Validate() error {
	if o.File != "" && len(o.specFlags) > 0 {
		return cmdutil.FlagErrorf("-f and %s cannot be combined: put every spec field in the file", strings.Join(o.specFlags, ", "))
	}
	if o.File == "" && o.Name == "" {
		return cmdutil.FlagErrorf("create needs a NAME or -f FILE")
	}
	if o.Name != "" {
		if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
			return cmdutil.FlagErrorf("invalid cluster name %q: %s", o.Name, strings.Join(errs, "; "))
		}
	}
	if o.Output != "yaml" && o.Output != "json" {
		return cmdutil.FlagErrorf("invalid output format %q: use yaml or json", o.Output)
	}
	if err := validateTimeout(o.Timeout); err != nil {
		return err
	}
	for _, kv := range o.MysqlConfig {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return cmdutil.FlagErrorf("--mysql-config %q: use KEY=VALUE", kv)
		}
	}
	return nil
}

// Complete builds the cluster from the file or the flags and validates it as the API server
// will (see validateCluster), so that a value the API would refuse is refused here, with the
// API's message, and a value the typed object cannot carry (replicas 0) never becomes a default.
func (o *CreateOptions) Complete() error {
	ns, err := o.f.Namespace()
	if err != nil && *o.f.ConfigFlags.Namespace == "" {
		return err
	}
	if *o.f.ConfigFlags.Namespace != "" {
		ns = *o.f.ConfigFlags.Namespace
	}
	o.Namespace = ns
	var raw map[string]any
	if o.File != "" {
		raw, err = o.fromFile(ns)
	} else {
		raw, err = o.fromFlags(ns)
	}
	if err != nil {
		return err
	}
	c, err := validateCluster(context.Background(), raw)
	if err != nil {
		return err
	}
	c.Default()
	o.Cluster = c
	return nil
}

// fromFile reads the cluster in -f as JSON maps, after checking it decodes strictly as a
// MysqlCluster (no unknown or misspelt field).
func (o *CreateOptions) fromFile(ns string) (map[string]any, error) {
	data, err := os.ReadFile(o.File)
	if err != nil {
		return nil, cmdutil.FlagErrorf("cannot read -f %s: %v", o.File, err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, cmdutil.FlagErrorf("%s is not YAML: %v", o.File, err)
	}
	if tm.Kind != "MysqlCluster" || tm.APIVersion != v1.GroupVersion.String() {
		return nil, cmdutil.FlagErrorf("%s holds %s %s, want kind MysqlCluster, apiVersion %s", o.File, tm.APIVersion, tm.Kind, v1.GroupVersion)
	}
	c := &v1.MysqlCluster{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, cmdutil.FlagErrorf("%s is not a valid MysqlCluster: %v", o.File, err)
	}
	if o.Name != "" && c.Name != "" && o.Name != c.Name {
		return nil, cmdutil.FlagErrorf("NAME %q differs from metadata.name %q in %s", o.Name, c.Name, o.File)
	}
	if c.Name == "" && o.Name == "" {
		return nil, cmdutil.FlagErrorf("%s has no metadata.name and no NAME was given", o.File)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, cmdutil.FlagErrorf("%s is not a valid MysqlCluster: %v", o.File, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, cmdutil.FlagErrorf("%s is not a valid MysqlCluster: %v", o.File, err)
	}
	if c.Name == "" {
		u.SetName(o.Name)
	}
	if flag := *o.f.ConfigFlags.Namespace; flag != "" && c.Namespace != "" && c.Namespace != flag {
		return nil, cmdutil.FlagErrorf("%s names namespace %q, and --namespace says %q: drop one, or make them agree", o.File, c.Namespace, flag)
	}
	if c.Namespace == "" {
		u.SetNamespace(ns)
	}
	// Never sent: the status is mysqlctl's to write.
	delete(u.Object, "status")
	return u.Object, nil
}

// fromFlags builds the cluster from the flags as JSON maps. Numbers and strings the typed
// object drops when zero or empty are set explicitly, so that the schema sees what was typed.
func (o *CreateOptions) fromFlags(ns string) (map[string]any, error) {
	c := &v1.MysqlCluster{TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster"}}
	c.Name, c.Namespace = o.Name, ns
	s := &c.Spec
	s.Image, s.Flavor, s.Replicas = o.Image, v1.Flavor(o.Flavor), o.Replicas
	s.Storage.Size = o.StorageSize
	if o.StorageClass != "" {
		s.Storage.StorageClassName = &o.StorageClass
	}
	s.PrimaryService, s.ReplicaService, s.CredentialsSecretName = o.PrimaryService, o.ReplicaService, o.CredentialsSecret
	for _, kv := range o.MysqlConfig {
		k, v, _ := strings.Cut(kv, "=")
		if s.MysqlConfig == nil {
			s.MysqlConfig = map[string]string{}
		}
		s.MysqlConfig[k] = v
	}
	s.SemiSync = v1.SemiSyncSpec{Enabled: &o.SemiSync, WaitForReplicas: o.SemiSyncWaitFor, Timeout: &metav1.Duration{Duration: o.SemiSyncTimeout}}
	s.Failover = v1.FailoverSpec{
		Auto:              &o.AutoFailover,
		DetectionInterval: &metav1.Duration{Duration: o.DetectionInterval},
		FailureThreshold:  o.FailureThreshold,
		Cooldown:          &metav1.Duration{Duration: o.Cooldown},
		MaxCandidateLag:   &metav1.Duration{Duration: o.MaxCandidateLag},
	}
	var err error
	if s.Resources.Requests, err = resourceList("--requests", o.Requests); err != nil {
		return nil, err
	}
	if s.Resources.Limits, err = resourceList("--limits", o.Limits); err != nil {
		return nil, err
	}
	s.Paused = o.Paused
	raw, err := toRaw(c)
	if err != nil {
		return nil, err
	}
	explicit := []struct {
		value any
		path  []string
	}{
		{int64(o.Replicas), []string{"spec", "replicas"}},
		{int64(o.SemiSyncWaitFor), []string{"spec", "semiSync", "waitForReplicas"}},
		{int64(o.FailureThreshold), []string{"spec", "failover", "failureThreshold"}},
		{o.Image, []string{"spec", "image"}},
		{o.StorageSize, []string{"spec", "storage", "size"}},
	}
	for _, e := range explicit {
		if err := unstructured.SetNestedField(raw, e.value, e.path...); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// resourceList parses NAME=QUANTITY pairs.
func resourceList(flag string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, cmdutil.FlagErrorf("%s %s=%s: %q is not a quantity (for example 500m, 1Gi)", flag, k, v, v)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// Run creates the cluster and its objects; on failure it removes what it created.
func (o *CreateOptions) Run(ctx context.Context) (retErr error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ios, cluster := o.f.IOStreams, o.Cluster
	// Problems mysqlctl itself would refuse later are reported before anything exists.
	if _, err := specs.RenderMyCnf(cluster); err != nil {
		return err
	}
	if o.DryRun == cmdutil.DryRunClient {
		return o.printDryRun()
	}
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	if o.DryRun == cmdutil.DryRunServer {
		return o.serverDryRun(ctx, c)
	}
	key := client.ObjectKeyFromObject(cluster)
	existing := &v1.MysqlCluster{}
	switch err := c.Get(ctx, key, existing); {
	case err == nil:
		return fmt.Errorf("MysqlCluster %s already exists: change it with 'apply -f' or converge it with 'reconcile %s'", key, cluster.Name)
	case !apierrors.IsNotFound(err):
		return cmdutil.ExplainAPIError(err)
	}
	if _, err := orchestrate.CheckSecret(ctx, c, cluster); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	// Let the API server validate (CEL included) before anything is created.
	if err := c.Create(ctx, cluster.DeepCopy(), client.DryRunAll); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	if err := c.Create(ctx, cluster); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	secretCreated, committed := false, false
	defer func() {
		if retErr == nil || committed {
			return
		}
		// Nothing half-created: the owned objects go with the cluster (garbage collection);
		// a Secret generated here goes too, as no data was ever written with it.
		_ = c.Delete(context.WithoutCancel(ctx), cluster)
		if secretCreated {
			s, _ := specs.BuildSecret(cluster)
			_ = c.Delete(context.WithoutCancel(ctx), s)
		}
		retErr = fmt.Errorf("%w (the partly created cluster was removed again)", retErr)
	}()
	secretCreated, err = orchestrate.EnsureSecret(ctx, c, cluster)
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	applied, err := orchestrate.ApplyDerived(ctx, c, cluster, specs.Convergence{})
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	fmt.Fprintf(ios.Out, "mysqlcluster.mysqlctl.io/%s created\n", cluster.Name)
	if secretCreated {
		fmt.Fprintf(ios.Out, "secret/%s created (random passwords)\n", specs.SecretName(cluster))
	}
	for _, a := range applied {
		fmt.Fprintln(ios.Out, a)
	}
	if !o.Wait {
		fmt.Fprintf(ios.ErrOut, "Replication is bootstrapped by 'reconcile %s' (or 'create --wait', or a running 'watch').\n", cluster.Name)
		return nil
	}
	// From here on the cluster stays even if bootstrap fails: its status records where it
	// stopped, and 'reconcile' resumes there.
	committed = true
	return o.bootstrap(ctx)
}

func (o *CreateOptions) bootstrap(ctx context.Context) error {
	return runBootstrap(ctx, o.f, client.ObjectKeyFromObject(o.Cluster), o.Dialer, o.Timeout, false)
}

// printDryRun prints the cluster and every derived object; the Secret's values are never shown.
func (o *CreateOptions) printDryRun() error {
	objs, err := orchestrate.DerivedObjects(o.Cluster, specs.Convergence{})
	if err != nil {
		return err
	}
	secret, err := specs.BuildSecret(o.Cluster)
	if err != nil {
		return err
	}
	maskSecret(secret)
	return o.printObjects(append([]client.Object{o.Cluster, secret}, objs...))
}

// maskSecret replaces every value of the Secret: a dry run never prints a password.
func maskSecret(s *corev1.Secret) {
	for k := range s.Data {
		s.Data[k] = []byte("<generated at create unless the Secret exists>")
	}
	for k := range s.StringData {
		s.StringData[k] = "<generated at create unless the Secret exists>"
	}
}

// serverDryRun sends every object create would write with dryRun=All and prints them as the
// API server returned them (validated, admitted and defaulted; nothing stored).
func (o *CreateOptions) serverDryRun(ctx context.Context, c client.Client) error {
	key := client.ObjectKeyFromObject(o.Cluster)
	if err := c.Get(ctx, key, &v1.MysqlCluster{}); err == nil {
		return fmt.Errorf("MysqlCluster %s already exists: change it with 'apply -f' or converge it with 'reconcile %s'", key, o.Cluster.Name)
	} else if !apierrors.IsNotFound(err) {
		return cmdutil.ExplainAPIError(err)
	}
	existing, err := orchestrate.CheckSecret(ctx, c, o.Cluster)
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	cluster := o.Cluster.DeepCopy()
	if err := c.Create(ctx, cluster, client.DryRunAll); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	// The server gave the cluster a UID (not stored): the owned objects reference it.
	cluster.SetGroupVersionKind(v1.GroupVersion.WithKind("MysqlCluster"))
	printed := []client.Object{cluster}
	if existing == nil {
		secret, err := specs.BuildSecret(cluster)
		if err != nil {
			return err
		}
		if err := c.Create(ctx, secret, client.DryRunAll); err != nil {
			return cmdutil.ExplainAPIError(err)
		}
		maskSecret(secret)
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		printed = append(printed, secret)
	}
	objs, err := orchestrate.DerivedObjects(cluster, specs.Convergence{})
	if err != nil {
		return err
	}
	for _, obj := range objs {
		u, err := orchestrate.DryRunApply(ctx, c, obj)
		if err != nil {
			return cmdutil.ExplainAPIError(err)
		}
		printed = append(printed, u)
	}
	return o.printObjects(printed)
}

// printObjects prints objects in the -o format (YAML documents or one JSON object each).
func (o *CreateOptions) printObjects(all []client.Object) error {
	out := o.f.IOStreams.Out
	for i, obj := range all {
		if o.Output == "json" {
			if err := cmdutil.PrintStructured(out, cmdutil.OutputJSON, obj); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if err := cmdutil.PrintStructured(out, cmdutil.OutputYAML, obj); err != nil {
			return err
		}
	}
	return nil
}
