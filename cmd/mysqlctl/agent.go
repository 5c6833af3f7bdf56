package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/physical"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// agentProgressEvery is how often the agent prints its progress line.
const agentProgressEvery = 5 * time.Second

// NewCmdAgent is what runs inside mysqlctl's backup and restore Jobs, next to the data: not a
// command for people, so it is hidden. Its results are JSON: progress lines on stdout while it
// works, a last line with the result, and the result again in the container's termination message,
// where the operation that made the Job reads it.
func NewCmdAgent(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run inside mysqlctl's backup and restore Jobs (not for direct use)",
		Hidden: true,
		Args:   cmdutil.NoArgs,
	}
	cmd.AddCommand(newCmdAgentBackup(f), newCmdAgentRestore(f), newCmdAgentInstallSelf(f))
	return cmd
}

// agentCommon are the flags every agent command shares.
type agentCommon struct {
	f              *cmdutil.Factory
	terminationLog string
	key            string
}

func (a *agentCommon) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.terminationLog, "termination-log", "/dev/termination-log", "Where the result is written for the operation to read (empty: nowhere)")
}

func (a *agentCommon) store() (*objectstore.Store, error) {
	cfg, err := backup.StoreConfigFromEnv(a.f.Getenv)
	if err != nil {
		return nil, err
	}
	return objectstore.New(cfg)
}

// agentProgress is the line an agent prints every agentProgressEvery while it copies: the bytes
// of the stream so far (Bytes), and how far it is (Done of Total, in the unit Total is known in:
// the data directory's size for a backup, the object's stored size for a restore; Total 0 when
// not known), after Seconds.
type agentProgress struct {
	Stage   string `json:"stage"`
	Bytes   int64  `json:"bytes"`
	Done    int64  `json:"done,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Seconds int    `json:"seconds"`
}

// report prints a progress line every agentProgressEvery until the returned stop is called: c
// counts the stream's bytes, done how far of total the copy is.
func (a *agentCommon) report(stage string, c, done *stream.Counter, total int64) (stop func()) {
	finished, exited := make(chan struct{}), make(chan struct{})
	start := time.Now()
	line := func() {
		_ = json.NewEncoder(a.f.IOStreams.Out).Encode(agentProgress{Stage: stage, Bytes: c.Bytes(), Done: done.Bytes(), Total: total, Seconds: int(time.Since(start).Seconds())})
	}
	go func() {
		defer close(exited)
		t := time.NewTicker(agentProgressEvery)
		defer t.Stop()
		line()
		for {
			select {
			case <-finished:
				line() // where the copy ended
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() { close(finished); <-exited }
}

// result prints the result and writes it as the termination message.
func (a *agentCommon) result(v any) error {
	b, err := json.Marshal(map[string]any{"result": v})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(a.f.IOStreams.Out, "%s\n", b); err != nil {
		return err
	}
	if a.terminationLog == "" {
		return nil
	}
	// The kubelet provides the file; outside a pod there is none, and none is created.
	f, err := os.OpenFile(a.terminationLog, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("write the result to %s: %w", a.terminationLog, err)
	}
	return nil
}

func newCmdAgentBackup(f *cmdutil.Factory) *cobra.Command {
	a := &agentCommon{f: f}
	o := physical.TakeOptions{Tool: physical.MariaDB}
	var m backup.Manifest
	var recipients []string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Stream a physical backup of a running server to the bucket",
		Long: `Runs mariadb-backup against the server and uploads its stream, compressed, to the
bucket named by MYSQLCTL_BUCKET* and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then the backup's
manifest, its commit marker. The server's password is MYSQL_PWD. Nothing is left under the
backup's directory unless the tool completed.`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if m.ID == "" || m.Namespace == "" || m.Cluster == "" || m.Source == "" || o.Host == "" || o.DataDir == "" {
				return cmdutil.FlagErrorf("--id, --namespace, --cluster, --source, --host and --datadir are required")
			}
			if len(recipients) > 0 {
				to, err := seal.ParseRecipients(recipients)
				if err != nil {
					return err
				}
				o.Recipients, m.Encryption = to, &backup.Encryption{Method: seal.Method, Recipients: recipients}
			}
			st, err := a.store()
			if err != nil {
				return err
			}
			// A backup's ID is taken once: a manifest already there is never replaced.
			dir := backup.Key(m.Namespace, m.Cluster, m.ID, "")
			existing, err := st.List(cmd.Context(), dir)
			if err != nil {
				return err
			}
			for _, obj := range existing {
				if obj.Key == dir+backup.ManifestName {
					return fmt.Errorf("%w: backup %s is already complete in the bucket (%s): nothing was done", outcome.ErrUnsafe, m.ID, obj.Key)
				}
			}
			if o.WorkDir == "" {
				if o.WorkDir, err = os.MkdirTemp("", "mysqlctl-backup-"); err != nil {
					return err
				}
				defer func() { _ = os.RemoveAll(o.WorkDir) }()
			}
			o.Store, o.Key, o.Log = st, backup.Key(m.Namespace, m.Cluster, m.ID, physical.ObjectName), f.IOStreams.ErrOut
			// The tool gets the server's password, never the bucket's keys.
			o.Env = toolEnv(os.Environ(), f.Getenv("MYSQL_PWD"))
			o.Raw = &stream.Counter{}
			m.StartedAt = time.Now().UTC().Truncate(time.Second)
			// The stream is about the data directory's size: how far it is, roughly.
			stop := a.report("backup", o.Raw, o.Raw, dirSize(o.DataDir))
			taken, err := physical.Take(cmd.Context(), o)
			stop()
			if err != nil {
				return err
			}
			m.Format, m.Method, m.Compression = backup.FormatVersion, backup.MethodPhysical, stream.Compression
			m.ServerVersion, m.GTIDPosition = taken.ServerVersion, taken.GTIDPosition
			m.FinishedAt = time.Now().UTC().Truncate(time.Second)
			m.Objects = []backup.Object{taken.Object}
			if err := stream.WriteManifest(cmd.Context(), st, m); err != nil {
				_ = st.Delete(context.WithoutCancel(cmd.Context()), o.Key)
				return fmt.Errorf("write the manifest of backup %s: %w", m.ID, err)
			}
			if err := a.result(agentBackupResult{Manifest: m, RawBytes: taken.RawBytes, BinlogFile: taken.BinlogFile, BinlogPos: taken.BinlogPos}); err != nil {
				// Unreported, the backup is recorded as failed: it must not stay complete in the bucket.
				mkey := backup.Key(m.Namespace, m.Cluster, m.ID, backup.ManifestName)
				_ = st.Delete(context.WithoutCancel(cmd.Context()), mkey)
				_ = st.Delete(context.WithoutCancel(cmd.Context()), o.Key)
				return err
			}
			return nil
		},
	}
	a.addFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&m.ID, "id", "", "The backup's ID")
	fl.StringVar(&m.Namespace, "namespace", "", "The cluster's namespace (the backup's directory, and its manifest)")
	fl.StringVar(&m.Cluster, "cluster", "", "The cluster's name")
	fl.StringVar(&m.ClusterUID, "cluster-uid", "", "The cluster's UID")
	fl.StringVar(&m.Flavor, "flavor", string(v1.FlavorMariaDB), "The server's flavor")
	fl.StringVar(&m.Source, "source", "", "The instance backed up")
	fl.StringVar(&o.Host, "host", "", "The server's host name")
	fl.IntVar(&o.Port, "port", 3306, "The server's port")
	fl.StringVar(&o.User, "user", "mysqlctl_backup", "The backup account (its password is MYSQL_PWD)")
	fl.StringVar(&o.DataDir, "datadir", "/var/lib/mysql", "The server's data directory, as mounted here")
	fl.StringVar(&o.WorkDir, "work-dir", "", "An empty directory for the tool's own files (default a new temporary one)")
	fl.StringArrayVar(&recipients, "recipient", nil, "An age public key (age1…) to encrypt the backup to (repeat for several)")
	return cmd
}

// agentBackupResult is what `agent backup` reports.
type agentBackupResult struct {
	Manifest   backup.Manifest `json:"manifest"`
	RawBytes   int64           `json:"rawBytes"`
	BinlogFile string          `json:"binlogFile,omitempty"`
	BinlogPos  uint64          `json:"binlogPos,omitempty"`
}

func newCmdAgentRestore(f *cmdutil.Factory) *cobra.Command {
	a := &agentCommon{f: f}
	o := physical.RestoreOptions{Tool: physical.MariaDB}
	reset, decrypt := false, false
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore a physical backup from the bucket into an empty data directory",
		Args:  cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.key == "" || o.BackupID == "" || o.Object.Size <= 0 || o.Object.SHA256 == "" {
				return cmdutil.FlagErrorf("--key, --backup-id, --size and --sha256 are required")
			}
			if decrypt {
				ids, err := seal.ParseIdentities(f.Getenv(backup.EnvIdentity))
				switch {
				case err != nil:
					return fmt.Errorf("--decrypt: %s: %w", backup.EnvIdentity, err)
				case ids.Empty():
					return cmdutil.FlagErrorf("--decrypt needs the identity file's text in %s, and it holds no key", backup.EnvIdentity)
				}
				// No tool this agent runs needs the private key.
				_ = os.Unsetenv(backup.EnvIdentity)
				o.Identities = ids
			}
			st, err := a.store()
			if err != nil {
				return err
			}
			o.Store, o.Key, o.Log = st, a.key, f.IOStreams.ErrOut
			o.Object.Name = filepath.Base(a.key)
			o.Raw, o.Read = &stream.Counter{}, &stream.Counter{}
			stop := a.report("restore", o.Raw, o.Read, o.Object.Size)
			if reset && f.Getenv(backup.EnvRootPassword) == "" {
				return cmdutil.FlagErrorf("--reset-root-password needs the new password in %s", backup.EnvRootPassword)
			}
			r, err := physical.Restore(cmd.Context(), o)
			stop()
			if err != nil {
				return err
			}
			if reset {
				// Also when an earlier run restored the data and ended before this: setting
				// the same password again changes nothing.
				fmt.Fprintln(f.IOStreams.ErrOut, "setting the restored data's root password to the new cluster's")
				if err := physical.ResetRootPassword(cmd.Context(), physical.ResetOptions{DataDir: o.DataDir, Password: f.Getenv(backup.EnvRootPassword), Log: f.IOStreams.ErrOut}); err != nil {
					return fmt.Errorf("restored, but root's password could not be set: %w", err)
				}
			}
			return a.result(r)
		},
	}
	a.addFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&a.key, "key", "", "The object's key below the bucket's prefix")
	fl.StringVar(&o.BackupID, "backup-id", "", "The backup's ID (recorded with the restored data)")
	fl.Int64Var(&o.Object.Size, "size", 0, "The object's size, from the manifest")
	fl.StringVar(&o.Object.SHA256, "sha256", "", "The object's SHA-256, from the manifest")
	fl.StringVar(&o.DataDir, "datadir", "/var/lib/mysql", "The new instance's empty data directory")
	fl.StringVar(&o.UseMemory, "use-memory", "", "Memory for the prepare (mariadb-backup --use-memory)")
	fl.BoolVar(&decrypt, "decrypt", false, "The object is encrypted: decrypt it with the age identity file's text in "+backup.EnvIdentity)
	fl.BoolVar(&reset, "reset-root-password", false, "Then set root's password in the restored data to the one in "+backup.EnvRootPassword+" (a restore from a bucket alone)")
	return cmd
}

// newCmdAgentInstallSelf copies the running binary to a path: an init container from mysqlctl's
// image (which has no shell and no cp) puts it in a volume the Job's main container, of the
// server's image, runs it from.
func newCmdAgentInstallSelf(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "install-self PATH",
		Short: "Copy this binary to PATH",
		Args:  cmdutil.ExactArgs(1, "the path to copy the binary to"),
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			return copyExecutable(self, args[0])
		},
	}
}

func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp := to + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// toolEnv is the backup tool's environment: this process's without the bucket's configuration
// and keys, with the server's password.
func toolEnv(environ []string, pwd string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "MYSQLCTL_BUCKET") || k == "MYSQL_PWD" {
			continue
		}
		env = append(env, kv)
	}
	if pwd != "" {
		env = append(env, "MYSQL_PWD="+pwd)
	}
	return env
}

// dirSize is the size of the regular files under dir (0 when it cannot be read).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
