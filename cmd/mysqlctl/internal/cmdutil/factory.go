package cmdutil

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

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
}

// RESTConfig returns the client configuration from the connection flags and kubeconfig.
func (f *Factory) RESTConfig() (*rest.Config, error) {
	cfg, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load a Kubernetes configuration: %w (set --kubeconfig or KUBECONFIG, or run in a cluster)", err)
	}
	cfg.UserAgent = "mysqlctl/" + f.Build.Version
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
