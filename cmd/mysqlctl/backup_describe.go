package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// BackupDescribeOptions holds the backup describe command's flags.
type BackupDescribeOptions struct {
	f *cmdutil.Factory
	bucketFlags

	Name string
	ID   string
}

// NewCmdBackupDescribe shows one backup's manifest and checks its objects are in the bucket.
func NewCmdBackupDescribe(f *cmdutil.Factory, runF func(*BackupDescribeOptions) error) *cobra.Command {
	o := &BackupDescribeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "describe NAME BACKUP",
		Short: "Show a backup's manifest and check that its objects are in the bucket",
		Long: `Describe reads one backup from the cluster's bucket, from where the command runs (as list
does): every field of its manifest, every object with its size and SHA-256, and whether every
object the manifest records is listed in the bucket with that size ("all N objects present").
The check reads the listing only: a changed byte is found when a restore reads the object and
checks its SHA-256.

Exit code 4 when the backup is damaged (an object missing or of another size), its manifest
is unreadable, it is recorded as failed (status.backup.lastFailure), its manifest names another
cluster of the same name (foreign), or it is incomplete (no manifest) and not running: a restore
would refuse it.
An ID that is not in the bucket is named with the IDs nearest to it.`,
		Example: example(f,
			"# The manifest and the check of one backup of demo",
			"%[1]s backup describe demo 20261207T001359Z-k3x9qa",
			"# As YAML",
			"%[1]s backup describe demo 20261207T001359Z-k3x9qa -o yaml"),
		Args:              cmdutil.ExactArgs(2, nameAndBackup),
		ValidArgsFunction: backupArgsCompletion(f, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.ID = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

// backupDescribeOutput is what -o json|yaml prints.
type backupDescribeOutput struct {
	// Cluster is NAMESPACE/NAME.
	Cluster string `json:"cluster"`
	// Location is the backup's directory, s3://BUCKET/PREFIX NAMESPACE/NAME/backups/ID/.
	Location string `json:"location"`
	catalog.Entry
}

// Run describes the backup; a backup a restore would refuse is an outcome.ErrUnsafe error
// after its description.
func (o *BackupDescribeOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openBucket(ctx, o.f, o.Name, o.Endpoint)
	if err != nil {
		return err
	}
	e, err := catalog.ReadOne(ctx, b.store, b.cluster.Namespace, b.cluster.Name, o.ID, b.runningID())
	if err != nil {
		return b.explain(o.f, err)
	}
	e = e.Judge(b.cluster)
	out := o.f.IOStreams.Out
	if o.Output != cmdutil.OutputTable {
		err = cmdutil.PrintStructured(out, o.Output, backupDescribeOutput{Cluster: b.cluster.Namespace + "/" + b.cluster.Name, Location: b.location(e.ID), Entry: e})
	} else {
		err = describeBackup(out, b, e)
	}
	if err != nil {
		return err
	}
	return backupVerdict(o.f, b.cluster, e)
}

// backupVerdict is nil for a backup a restore would take (complete) or one still running, and
// an outcome.ErrUnsafe error saying why otherwise.
func backupVerdict(f *cmdutil.Factory, c *v1.MysqlCluster, e catalog.Entry) error {
	why := ""
	switch e.State {
	case catalog.Complete, catalog.Running:
		return nil
	case catalog.Damaged, catalog.Unreadable, catalog.Failed, catalog.Foreign:
		why = strings.Join(e.Problems, "; ")
	case catalog.Incomplete:
		why = "it has no manifest"
	}
	return fmt.Errorf("%w: backup %s of %s is %s: %s; a restore would refuse it ('%s backup delete %s %s' removes it)",
		outcome.ErrUnsafe, e.ID, c.Name, e.State, why, f.DisplayName, c.Name, e.ID)
}

// describeBackup writes the backup for a person: the same text on a terminal and off one.
func describeBackup(w io.Writer, b *clusterBucket, e catalog.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", name, fmt.Sprintf(format, args...))
	}
	field("Backup", "%s", e.ID)
	field("Cluster", "%s/%s", b.cluster.Namespace, b.cluster.Name)
	field("Location", "%s", b.location(e.ID))
	field("State", "%s", backupStateLine(b, e))
	if m := e.Manifest; m != nil {
		field("Cluster UID", "%s", dash(m.ClusterUID))
		field("Format", "%d", m.Format)
		field("Method", "%s", m.Method)
		field("Flavor", "%s", m.Flavor)
		field("Server version", "%s", m.ServerVersion)
		field("Source", "%s", m.Source)
		field("GTID position", "%s", dash(m.GTIDPosition))
		field("Started", "%s", m.StartedAt.UTC().Format(time.RFC3339))
		field("Finished", "%s (took %s)", m.FinishedAt.UTC().Format(time.RFC3339), m.FinishedAt.Sub(m.StartedAt).Round(time.Second))
		field("Compression", "%s", m.Compression)
		if enc := m.Encryption; enc != nil {
			field("Encryption", "%s, to %s (restore needs the private key of one)", enc.Method, strings.Join(enc.Recipients, ", "))
		} else {
			field("Encryption", "none")
		}
		var stored int64
		for _, o := range m.Objects {
			stored += o.Size
		}
		field("Stored", "%s (%d bytes) in %d object(s)", humanBytes(stored), stored, len(m.Objects))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if m := e.Manifest; m != nil {
		fmt.Fprintln(tw, "Objects (as the manifest records them):")
		fmt.Fprintln(tw, "  NAME\tSIZE\tSHA-256")
		for _, o := range m.Objects {
			fmt.Fprintf(tw, "  %s\t%d\t%s\n", o.Name, o.Size, o.SHA256)
		}
	} else {
		fmt.Fprintln(tw, "Listed in the bucket:")
		fmt.Fprintln(tw, "  NAME\tSIZE\tMODIFIED")
		for _, o := range e.Listed {
			fmt.Fprintf(tw, "  %s\t%d\t%s\n", o.Name, o.Size, o.LastModified.UTC().Format(time.RFC3339))
		}
	}
	return tw.Flush()
}

// backupStateLine says what the backup's state means, with the check's result.
func backupStateLine(b *clusterBucket, e catalog.Entry) string {
	switch e.State {
	case catalog.Complete:
		return fmt.Sprintf("complete: all %d objects present", len(e.Manifest.Objects))
	case catalog.Running:
		line := "running (status.backup.running): no manifest yet"
		if run := b.running(); run != nil {
			line = fmt.Sprintf("running (status.backup.running, stage %s, source %s): no manifest yet", run.Stage, dash(run.Source))
		}
		return line
	case catalog.Incomplete:
		return "incomplete: no manifest (a backup that failed or was aborted before writing it, or a delete that was interrupted)"
	}
	return fmt.Sprintf("%s: %s", strings.ToUpper(string(e.State)), strings.Join(e.Problems, "; "))
}
