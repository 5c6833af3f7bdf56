package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// BackupDeleteOptions holds the backup delete command's flags.
type BackupDeleteOptions struct {
	f *cmdutil.Factory
	bucketFlags

	Name string
	ID   string
	confirmFlags
}

// confirmFlags are the flags of a command that deletes from the bucket: --yes and --dry-run.
type confirmFlags struct {
	Yes    bool
	DryRun cmdutil.DryRun
}

// add adds --yes and --dry-run (with its help).
func (c *confirmFlags) add(cmd *cobra.Command, dryRun string) {
	cmd.Flags().BoolVarP(&c.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmdutil.AddDryRunFlag(cmd, &c.DryRun, dryRun)
}

// canAsk refuses a run that would have to ask off a terminal.
func (c *confirmFlags) canAsk(f *cmdutil.Factory, command string) error {
	if !c.Yes && c.DryRun == cmdutil.DryRunNone && !f.IOStreams.IsStdinTTY() {
		return cmdutil.FlagErrorf("not on a terminal, so %s cannot ask for confirmation: add --yes", command)
	}
	return nil
}

// confirmed asks the question (unless --yes) and reports whether the answer is want.
func (c *confirmFlags) confirmed(ios *iostreams.IOStreams, question, want string) error {
	if c.Yes {
		return nil
	}
	fmt.Fprint(ios.ErrOut, question)
	answer, _ := bufio.NewReader(ios.In).ReadString('\n')
	if strings.TrimSpace(answer) != want {
		return fmt.Errorf("not confirmed: nothing deleted")
	}
	return nil
}

// NewCmdBackupDelete deletes one backup from the cluster's bucket.
func NewCmdBackupDelete(f *cmdutil.Factory, runF func(*BackupDeleteOptions) error) *cobra.Command {
	o := &BackupDeleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "delete NAME BACKUP",
		Short: "Delete a backup from the cluster's bucket",
		Long: `Delete removes every object of one backup from the cluster's bucket, from where the command
runs (as list does). The manifest goes first, so a delete interrupted anywhere leaves an
incomplete directory, never listed as a backup; deleting it again finishes. An incomplete,
damaged or unreadable backup is deleted the same way. Multipart uploads left in its directory
(the copy of an aborted backup) are aborted too.

The backup in progress (status.backup.running) is refused: stop it with 'backup abort NAME'
first. The status is never changed: when status.backup.last names the backup, delete says so.

On a terminal, delete asks for confirmation (type the backup's ID); --yes skips the question
(required when not on a terminal). --dry-run lists what would be deleted.`,
		Example: example(f,
			"# What deleting a backup of demo would remove",
			"%[1]s backup delete demo 20261207T001359Z-k3x9qa --dry-run",
			"# Delete it without asking",
			"%[1]s backup delete demo 20261207T001359Z-k3x9qa --yes"),
		Args:              cmdutil.ExactArgs(2, nameAndBackup),
		ValidArgsFunction: backupArgsCompletion(f, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.ID = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			if err := o.canAsk(f, "backup delete"); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, false)
	o.add(cmd, "List what would be deleted and delete nothing (client)")
	return cmd
}

// Run deletes the backup.
func (o *BackupDeleteOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openBucket(ctx, o.f, o.Name, o.Endpoint)
	if err != nil {
		return err
	}
	if err := catalog.Deletable(b.cluster, o.ID); err != nil {
		return err
	}
	ns, name := b.cluster.Namespace, b.cluster.Name
	e, err := catalog.ReadOne(ctx, b.store, ns, name, o.ID, "")
	if err != nil {
		return b.explain(o.f, err)
	}
	if e = e.Judge(b.cluster); e.State == catalog.Foreign {
		return fmt.Errorf("%w: backup %s is not %s's: %s; delete it from the cluster it belongs to",
			outcome.ErrUnsafe, e.ID, name, strings.Join(e.Problems, "; "))
	}
	ios := o.f.IOStreams
	what := fmt.Sprintf("backup %s of %s (%s, %d object(s), %s)", e.ID, name, e.State, len(e.Listed), humanBytes(e.ListedBytes()))
	if o.DryRun != cmdutil.DryRunNone {
		fmt.Fprintf(ios.Out, "%s would be deleted from %s, in this order:\n", what, b.location(e.ID))
		for _, l := range e.DeleteOrder() {
			fmt.Fprintf(ios.Out, "  %s (%d bytes)\n", l.Name, l.Size)
		}
		return nil
	}
	if err := o.confirmed(ios, fmt.Sprintf("Delete %s from %s? Type the backup ID to confirm: ", what, b.location(e.ID)), e.ID); err != nil {
		return err
	}
	d, err := catalog.Delete(ctx, b.store, ns, name, e, o.f.Clock())
	if err != nil {
		return fmt.Errorf("%w (what is left is an incomplete directory: run 'backup delete %s %s' again to finish)", b.explain(o.f, err), name, e.ID)
	}
	line := fmt.Sprintf("backup %s of %s deleted: %d object(s), %s (%d bytes)", e.ID, name, d.Objects, humanBytes(d.Bytes), d.Bytes)
	if d.AbortedUploads > 0 {
		line += fmt.Sprintf("; %d incomplete upload(s) aborted", d.AbortedUploads)
	}
	fmt.Fprintln(ios.Out, line)
	if st := b.cluster.Status.Backup; st != nil && st.Last != nil && st.Last.ID == e.ID {
		fmt.Fprintf(ios.ErrOut, "status.backup.last still names backup %s: it records the last backup taken, and is left as it is\n", e.ID)
	}
	return nil
}
