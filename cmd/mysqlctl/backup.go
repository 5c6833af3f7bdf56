package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// defaultBackupTimeout bounds `backup create`: a backup of a large database takes hours.
const defaultBackupTimeout = 6 * time.Hour

// NewCmdBackup groups the backup commands.
func NewCmdBackup(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Take, list, check and delete physical backups of a cluster in an S3-compatible bucket",
		Long: `A backup is a physical copy of one instance's data directory (mariadb-backup), streamed,
compressed, by a Job on that instance's node to the bucket spec.backup names, under
PREFIX NAMESPACE/NAME/backups/ID/, with a manifest written last: a backup without its manifest is
not one. The Job reads the data volume read-only and reaches the server as the mysqlctl_backup
account (RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR), whose password mysqlctl adds to the
cluster's Secret as backup-password. Credentials reach the Job from Secrets only.

Set spec.backup first (kubectl edit, or apply -f):

  backup:
    bucket: my-backups
    endpoint: https://s3.example.com     # empty for AWS S3
    region: us-east-1
    pathStyle: true                      # most stores other than AWS S3
    credentialsSecretName: my-bucket     # keys access-key-id and secret-access-key

A backup is recorded in status.backup, a slot of its own: it never holds up a failover or a
switchover, and one runs at a time per cluster.

list, describe, delete and prune read the bucket from where they run, with the keys of that Secret
(read through the API server); --endpoint replaces spec.backup.endpoint when this machine
reaches the store at another address than the cluster does.`,
		Args: cmdutil.NoArgs,
	}
	cmd.AddCommand(NewCmdBackupCreate(f, nil), NewCmdBackupAbort(f),
		NewCmdBackupList(f, nil), NewCmdBackupDescribe(f, nil), NewCmdBackupDelete(f, nil), NewCmdBackupPrune(f, nil))
	return cmd
}

// NewCmdBackupAbort stops the backup in progress.
func NewCmdBackupAbort(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "abort NAME",
		Short: "Stop the backup in progress and record it as failed",
		Long: `Abort stops the backup recorded in status.backup.running: its Job and its pod are deleted
(the copy under way is abandoned) and the backup is recorded in status.backup.lastFailure as
aborted. Once the pod is gone, what the copy stored in the bucket is deleted (read from where the
command runs, as 'backup list' does; a bucket it cannot reach is reported). Use it for a backup that cannot
finish, for example one waiting for a source that is gone. A backup whose copy has finished (its
Job completed: its manifest is in the bucket) is not aborted: 'backup create NAME' records it.`,
		Example: example(f,
			"# Stop demo's backup in progress",
			"%[1]s backup abort demo"),
		Args:              cmdutil.ExactArgs(1, "the NAME of the cluster"),
		ValidArgsFunction: backupArgsCompletion(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			_, cluster, err := loadCluster(ctx, f, args[0])
			if err != nil {
				return err
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			r := &orchestrate.Runner{Kube: c, Holder: holderName()}
			key := client.ObjectKeyFromObject(cluster)
			id, err := r.AbortBackup(ctx, key)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IOStreams.Out, "backup %s of %s aborted\n", id, cluster.Name)
			return removeAborted(ctx, f, r, key, id)
		},
	}
}

// removeAborted waits until the aborted backup's copy has stopped, then deletes what it left in
// the bucket: a copy that finished before the abort reached it wrote a manifest, and the bucket
// would hold a complete backup the status records as aborted. A bucket this machine cannot
// reach is reported, not an error: the abort itself is done.
func removeAborted(ctx context.Context, f *cmdutil.Factory, r *orchestrate.Runner, key client.ObjectKey, id string) error {
	ios := f.IOStreams
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	later := fmt.Sprintf("'%s backup list %s' shows what it left in the bucket and 'backup delete %s %s' removes it", f.DisplayName, key.Name, key.Name, id)
	if err := r.WaitBackupStopped(wctx, key, id); err != nil {
		fmt.Fprintf(ios.ErrOut, "warning: %v; %s\n", err, later)
		return nil
	}
	d, err := deleteAborted(ctx, f, key, id)
	switch {
	case err != nil:
		fmt.Fprintf(ios.ErrOut, "warning: could not check the bucket for what the backup stored (%v): %s\n", err, later)
	case d.Objects > 0 || d.AbortedUploads > 0:
		fmt.Fprintf(ios.Out, "deleted what it had stored: %d object(s), %s, and %d unfinished upload(s)\n", d.Objects, humanBytes(d.Bytes), d.AbortedUploads)
	}
	return nil
}

// deleteAborted deletes what the aborted backup id stored: its objects, and its unfinished
// multipart uploads, which no listing shows (an upload in progress when the copy was stopped).
func deleteAborted(ctx context.Context, f *cmdutil.Factory, key client.ObjectKey, id string) (catalog.Deleted, error) {
	b, err := openBucket(ctx, f, key.Name, "")
	if err != nil {
		return catalog.Deleted{}, err
	}
	e, err := catalog.ReadOne(ctx, b.store, key.Namespace, key.Name, id, "")
	if catalog.IsNotFound(err) {
		e, err = catalog.Entry{ID: id}, nil // no object listed: its upload may be unfinished
	}
	if err != nil {
		return catalog.Deleted{}, err
	}
	return catalog.Delete(ctx, b.store, key.Namespace, key.Name, e, f.Clock())
}

// BackupCreateOptions holds the backup create command's flags.
type BackupCreateOptions struct {
	f *cmdutil.Factory

	Name    string
	Source  string
	Output  string
	Timeout time.Duration
	Dialer  string
}

// NewCmdBackupCreate takes a backup, or continues the one recorded.
func NewCmdBackupCreate(f *cmdutil.Factory, runF func(*BackupCreateOptions) error) *cobra.Command {
	o := &BackupCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create NAME [--source replica|primary|POD]",
		Short: "Take a backup of a cluster now",
		Long: `Create takes a physical backup of the cluster and waits for it, each stage recorded in
status.backup.running:

  ChoosingSource     the instance to copy: by default the highest-ordinal ready replica that is
                     not quarantined, never one the primary needs to acknowledge its commits
                     (semiSync.waitForReplicas); --source primary or --source POD choose
  PreparingAccount   the mysqlctl_backup account, created on the writable primary (never on a
                     read-only server) so that every replica has it
  StartingJob        the Job that copies it, on the source's node (created once)
  Copying            the Job streams mariadb-backup's copy to the bucket and writes the manifest
                     last; its result is the manifest

When the command is interrupted, running it again continues the recorded backup where it stopped
(a Job already started is waited for, never started twice; one gone before its result was read
fails the backup). A failed backup leaves nothing listed and is recorded in
status.backup.lastFailure with why.`,
		Example: example(f,
			"# Back up a replica of demo",
			"%[1]s backup create demo",
			"# Back up the primary (a cluster with one replica under semi-sync)",
			"%[1]s backup create demo --source primary",
			"# The backup's record as JSON, for a script",
			"%[1]s backup create demo -o json"),
		Args:              cmdutil.ExactArgs(1, "the NAME of the cluster"),
		ValidArgsFunction: backupArgsCompletion(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if err := cmdutil.ValidateOutput(o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.Source, "source", orchestrate.BackupSourceReplica, "The instance to copy: replica (a ready replica not needed for semi-sync acknowledgements), primary, or a pod's name")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", defaultBackupTimeout, "How long to wait for the backup; when it passes, the backup stays recorded and running it again continues it")
	addDialerFlag(cmd, &o.Dialer)
	cmdutil.AddOutputFlag(cmd, &o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
	return cmd
}

// Run takes the backup (or continues the recorded one) and prints its record.
func (o *BackupCreateOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	connect, closeFn, err := o.f.Connector(o.Dialer)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ios := o.f.IOStreams
	start := time.Now()
	if st := cluster.Status.Backup; st != nil && st.Running != nil {
		source := fmt.Sprintf("source %s; --source applies to a new backup only", st.Running.Source)
		if st.Running.Stage == orchestrate.StageBackupChoosingSource {
			source = "no source chosen yet: this run's --source applies"
		}
		fmt.Fprintf(ios.ErrOut, "continuing backup %s, recorded at stage %s (%s; 'backup abort %s' stops it)\n",
			st.Running.ID, st.Running.Stage, source, cluster.Name)
	}
	r := &orchestrate.Runner{Kube: c, Connect: connect, Holder: holderName()}
	armFailpoints(o.f, r)
	key := client.ObjectKeyFromObject(cluster)
	stopProgress := followCopy(ctx, o.f, cluster.Namespace, func(ctx context.Context) string {
		now := &v1.MysqlCluster{}
		if c.Get(ctx, key, now) != nil || now.Status.Backup == nil || now.Status.Backup.Running == nil || now.Status.Backup.Running.Stage != orchestrate.StageBackupCopying {
			return ""
		}
		return now.Status.Backup.Running.Job
	}, func(line string) {
		fmt.Fprintf(ios.ErrOut, "[%6.1fs] backup copying: %s\n", time.Since(start).Seconds(), line)
	})
	rec, err := r.Backup(ctx, key, orchestrate.BackupOptions{
		Source: o.Source,
		Progress: func(run v1.BackupRun) {
			line := fmt.Sprintf("[%6.1fs] backup %s %s", time.Since(start).Seconds(), run.ID, run.Stage)
			if run.Message != "" {
				line += ": " + run.Message
			}
			fmt.Fprintln(ios.ErrOut, line)
		},
	})
	stopProgress()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w after %s: %w (the backup stays recorded: run 'backup create %s' again to continue it)", outcomeTimedOut(), o.Timeout, err, cluster.Name)
	}
	if err != nil {
		return err
	}
	if o.Output != cmdutil.OutputTable {
		return cmdutil.PrintStructured(ios.Out, o.Output, rec)
	}
	_, err = fmt.Fprintf(ios.Out, "backup %s of %s completed in %s: %s stored (%s read) from %s, at GTID %s\n",
		rec.ID, cluster.Name, rec.FinishedAt.Sub(rec.StartedAt.Time).Round(time.Second), humanBytes(rec.StoredBytes), humanBytes(rec.RawBytes), rec.Source, rec.GTIDPosition)
	return err
}

// humanBytes prints a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
