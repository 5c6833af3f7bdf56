package cmdutil

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// Factory hands commands what they depend on. Clients are built lazily, so commands that never
// talk to a cluster (version, completion, --help) never read a kubeconfig.
type Factory struct {
	// IOStreams are the streams every command writes through.
	IOStreams *iostreams.IOStreams
	// ConfigFlags are kubectl's connection flags (--kubeconfig, --context, -n, …).
	ConfigFlags *genericclioptions.ConfigFlags
	// Build is this binary's build information.
	Build BuildInfo
	// DisplayName is how the program names itself in help and messages: "mysqlctl", or
	// "kubectl mysql" when run as the kubectl plugin.
	DisplayName string
	// Getenv reads the environment (injected for tests).
	Getenv func(string) string
	// Now is the clock that output measures ages against (injected for tests; nil: time.Now).
	Now func() time.Time
}

// Clock returns the time now by f.Now, or time.Now when none is injected.
func (f *Factory) Clock() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// RESTConfig returns the client configuration from the connection flags and kubeconfig.
func (f *Factory) RESTConfig() (*rest.Config, error) {
	cfg, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		// A configuration that cannot be loaded is a bad input (exit code 2), like a bad flag.
		return nil, outcome.Invalid(fmt.Sprintf("cannot load a Kubernetes configuration: %v (check --kubeconfig, KUBECONFIG and --context: 'kubectl config get-contexts' lists the contexts; or run in a cluster)", err))
	}
	cfg.UserAgent = "mysqlctl/" + f.Build.Version
	// client-go's default of 5 requests per second (burst 10) throttles a failover: every
	// stage lists pods, reads the Secret, patches labels and writes status, and once the burst
	// is spent each request waits 200 ms while clients cannot write. The API server's priority
	// and fairness still protects it; kubectl raises the limits the same way.
	if cfg.QPS == 0 {
		cfg.QPS = 50
	}
	if cfg.Burst == 0 {
		cfg.Burst = 100
	}
	return cfg, nil
}

// Namespace returns -n, or the kubeconfig context's namespace, or "default".
func (f *Factory) Namespace() (string, error) {
	ns, _, err := f.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("cannot determine the namespace: %w", err)
	}
	return ns, nil
}

// BuildInfo describes the binary.
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewBuildInfo completes the values set at link time (-X) with what the Go toolchain recorded
// in the binary (VCS revision and time), so `go install` builds report something useful too.
func NewBuildInfo(version, commit, date string) BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// Scheme knows the built-in Kubernetes types and MysqlCluster.
func Scheme() *kruntime.Scheme {
	s := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Client returns a Kubernetes client for the connection flags.
func (f *Factory) Client() (client.Client, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", cfg.Host, err)
	}
	return c, nil
}

// ExplainAPIError turns the API errors a person can act on into sentences: a missing CRD,
// a missing permission (verb and resource), an unreachable server.
func ExplainAPIError(err error) error {
	if err == nil {
		return nil
	}
	var noKind *meta.NoKindMatchError
	switch {
	case errors.As(err, &noKind) || meta.IsNoMatchError(err):
		return fmt.Errorf("the MysqlCluster CRD is not installed in this cluster: run 'mysqlctl install' (needs cluster-admin once)")
	case apierrors.IsInvalid(err):
		// The API server refused a value (its schema, a CEL rule, an immutable field): a bad
		// input, exit code 2, with the server's own message.
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return outcome.Invalid("the API server refused it: " + status.Status().Message)
		}
		return outcome.Invalid(err.Error())
	case apierrors.IsForbidden(err):
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			// The API server's message names the user, verb, resource and namespace.
			return fmt.Errorf("permission denied: %s (ask for this permission; manifests/rbac/README.md lists what mysqlctl needs)", status.Status().Message)
		}
		return fmt.Errorf("permission denied: %w", err)
	}
	return err
}
