package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes the environment variables that set flags: MYSQLCTL_NAMESPACE sets
// --namespace, MYSQLCTL_REQUEST_TIMEOUT sets --request-timeout.
const EnvPrefix = "MYSQLCTL"

// configurableAnnotation marks a flag that the config file and environment may set. Only
// connection and presentation flags are configurable: an operation's own flags (--force,
// --to, --replicas) must be typed on the command line, never inherited from the environment.
const configurableAnnotation = "mysqlctl.io/configurable"

func setConfigurable(f *pflag.Flag) {
	if f == nil {
		return
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[configurableAnnotation] = []string{"true"}
}

// MarkConfigurable lets the config file and MYSQLCTL_* environment variables set the named flags.
func MarkConfigurable(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		setConfigurable(fs.Lookup(n))
	}
}

// DefaultConfigFile is the config file read when --config and MYSQLCTL_CONFIG are unset:
// $XDG_CONFIG_HOME/mysqlctl/config.yaml (or the OS's user config directory).
func DefaultConfigFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mysqlctl", "config.yaml")
}

// ApplyConfig resolves every configurable flag that was not given on the command line from, in
// order, the MYSQLCTL_* environment and the config file. Flags given on the command line always
// win. path is the explicit --config value (an explicitly named file must exist); getenv is
// injected so tests need not touch the process environment.
func ApplyConfig(fs *pflag.FlagSet, path string, getenv func(string) string) error {
	v := viper.New()
	explicit := path != ""
	if !explicit {
		path = getenv(EnvPrefix + "_CONFIG")
		explicit = path != ""
	}
	if !explicit {
		path = DefaultConfigFile()
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var notFound viper.ConfigFileNotFoundError
			if explicit || (!errors.As(err, &notFound) && !errors.Is(err, os.ErrNotExist)) {
				return fmt.Errorf("read config file %s: %w", path, err)
			}
		}
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Annotations[configurableAnnotation] == nil {
			return
		}
		env := EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		val, from := getenv(env), env
		if val == "" && v.IsSet(f.Name) {
			val, from = v.GetString(f.Name), "config file "+path
		}
		if val == "" {
			return
		}
		if err := f.Value.Set(val); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for --%s from %s: %w", val, f.Name, from, err))
		}
	})
	return errors.Join(errs...)
}
