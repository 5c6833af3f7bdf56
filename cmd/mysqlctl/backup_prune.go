package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// BackupPruneOptions holds the backup prune command's flags.
type BackupPruneOptions struct {
	f *cmdutil.Factory
	bucketFlags

	Name string
	confirmFlags
}

// NewCmdBackupPrune deletes the backups the cluster's retention rule no longer keeps.
func NewCmdBackupPrune(f *cmdutil.Factory, runF func(*BackupPruneOptions) error) *cobra.Command {
	o := &BackupPruneOptions{f: f}
	cmd := &cobra.Command{
		Use:   "prune NAME",
		Short: "Delete the backups spec.backup.retention no longer keeps",
		Long: `Prune applies the cluster's retention rule (spec.backup.retention) to its bucket, from where the
command runs (as list does): it deletes the complete backups past the newest keepLast, or whose
copy finished longer ago than maxAge, except the newest minKeep (default 1), and the directories
of copies that failed or were aborted (no manifest) older than the newest complete backup. The
running backup, and damaged, failed or foreign ones, are never deleted by a prune: 'backup
delete' deletes one by hand. Each backup is deleted as 'backup delete' deletes it, the manifest
first.

watch prunes the same way after each scheduled backup that succeeds.

On a terminal, prune asks for confirmation (type yes); --yes skips the question (required when
not on a terminal). --dry-run lists what would be deleted, and why.`,
		Example: example(f,
			"# What demo's retention rule would delete",
			"%[1]s backup prune demo --dry-run",
			"# Delete it without asking",
			"%[1]s backup prune demo --yes"),
		Args:              cmdutil.ExactArgs(1, "the NAME of the cluster"),
		ValidArgsFunction: backupArgsCompletion(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if err := o.canAsk(f, "backup prune"); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, false)
	o.add(cmd, "List what would be deleted, and why, and delete nothing (client)")
	return cmd
}

// Run prunes the cluster's backups.
func (o *BackupPruneOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openBucket(ctx, o.f, o.Name, o.Endpoint)
	if err != nil {
		return err
	}
	rule, ok := catalog.RetentionOf(b.cluster)
	if !ok {
		return fmt.Errorf("%w: %s has no spec.backup.retention, so nothing says which backups go: set keepLast or maxAge there ('backup delete' deletes one backup by hand)",
			outcome.ErrInvalid, o.Name)
	}
	ios := o.f.IOStreams
	now := o.f.Clock()
	expired, err := catalog.Expiring(ctx, b.store, b.cluster, rule, now)
	if err != nil {
		return b.explain(o.f, err)
	}
	if len(expired) == 0 {
		fmt.Fprintf(ios.ErrOut, "nothing to prune in %s (%s)\n", b.location(""), rule)
		return nil
	}
	for _, e := range expired {
		verb := "would delete"
		if o.DryRun == cmdutil.DryRunNone {
			verb = "to delete"
		}
		fmt.Fprintf(ios.Out, "%s %s (%s, %s): %s\n", verb, e.Entry.ID, e.Entry.State, humanBytes(e.Entry.ListedBytes()), e.Reason)
	}
	if o.DryRun != cmdutil.DryRunNone {
		return nil
	}
	if err := o.confirmed(ios, fmt.Sprintf("Delete these %d backup(s) from %s? Type yes to confirm: ", len(expired), b.location("")), "yes"); err != nil {
		return err
	}
	// Exactly what was listed (and confirmed): a backup that expired since waits for the next prune.
	deleted, err := catalog.DeleteExpired(ctx, b.store, b.cluster, expired, now)
	for _, e := range deleted {
		fmt.Fprintf(ios.Out, "deleted %s\n", e.Entry.ID)
	}
	if err != nil {
		return fmt.Errorf("%w (run 'backup prune %s' again to finish)", b.explain(o.f, err), o.Name)
	}
	return nil
}
