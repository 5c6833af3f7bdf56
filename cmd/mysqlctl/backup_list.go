package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
)

// bucketRequestTimeout bounds each request list, describe and delete make to the bucket (a
// listing page, a manifest, a delete): all small, so a store that does not answer is reported
// soon rather than after objectstore's bound for a part of an upload.
const bucketRequestTimeout = 30 * time.Second

// endpointUsage is the --endpoint flag's help, shared by the commands that read the bucket.
const endpointUsage = "The store's URL as this machine reaches it, in place of spec.backup.endpoint (the cluster's address for it, which a workstation may not reach): for example a port-forward's http://127.0.0.1:9000"

// nameAndBackup names the arguments of describe and delete.
const nameAndBackup = "the NAME of the cluster and the ID of a BACKUP ('backup list NAME' lists them)"

// validateEndpoint refuses an --endpoint that is not an http:// or https:// URL, as the CRD
// refuses such a spec.backup.endpoint.
func validateEndpoint(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cmdutil.FlagErrorf("--endpoint %q is not an http:// or https:// URL", s)
	}
	return nil
}

// bucketFlags are the flags of the commands that read a cluster's bucket from where they run.
type bucketFlags struct {
	Endpoint string
	// Output is -o, for the commands that print data (empty for the others).
	Output string
}

// addFlags adds --endpoint and, with output, -o json|yaml.
func (b *bucketFlags) addFlags(cmd *cobra.Command, output bool) {
	cmd.Flags().StringVar(&b.Endpoint, "endpoint", "", endpointUsage)
	if output {
		cmdutil.AddOutputFlag(cmd, &b.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
	}
}

// validate checks the flags (a usage error for a bad value); it is pure.
func (b *bucketFlags) validate() error {
	if b.Output != "" {
		if err := cmdutil.ValidateOutput(b.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML); err != nil {
			return err
		}
	}
	return validateEndpoint(b.Endpoint)
}

// clusterBucket is a cluster and its bucket, reached from where the command runs.
type clusterBucket struct {
	cluster *v1.MysqlCluster
	// cfg is the bucket's configuration without its keys.
	cfg      objectstore.Config
	store    *objectstore.Store
	endpoint string // --endpoint, when given
}

// openBucket reads the cluster, then its bucket's configuration from spec.backup and the keys
// from the Secret it names (through the API server); endpoint, when set, replaces
// spec.backup.endpoint.
func openBucket(ctx context.Context, f *cmdutil.Factory, name, endpoint string) (*clusterBucket, error) {
	c, cluster, err := loadCluster(ctx, f, name)
	if err != nil {
		return nil, err
	}
	cfg, err := catalog.StoreConfig(ctx, c, cluster)
	if err != nil {
		return nil, cmdutil.ExplainAPIError(err)
	}
	return newClusterBucket(cluster, cfg, endpoint)
}

// location is the directory of the cluster's backups, s3://BUCKET/PREFIX NAMESPACE/NAME/backups/,
// or of backup id in it.
func (b *clusterBucket) location(id string) string {
	dir := "s3://" + b.cfg.Bucket + "/" + b.cfg.Prefix + backup.Dir(b.cluster.Namespace, b.cluster.Name)
	if id != "" {
		dir += id + "/"
	}
	return dir
}

// running is the backup in progress recorded in the status, or nil.
func (b *clusterBucket) running() *v1.BackupRun {
	if st := b.cluster.Status.Backup; st != nil {
		return st.Running
	}
	return nil
}

// runningID is the ID of the backup in progress, or "".
func (b *clusterBucket) runningID() string {
	if run := b.running(); run != nil {
		return run.ID
	}
	return ""
}

// explain adds what to do to an error of the store: one this machine cannot reach at
// spec.backup.endpoint (an in-cluster address, say) wants --endpoint; an unknown ID, the list.
func (b *clusterBucket) explain(f *cmdutil.Factory, err error) error {
	var ne net.Error
	switch {
	case catalog.IsNotFound(err):
		return fmt.Errorf("%w: '%s backup list %s' lists the backups", err, f.DisplayName, b.cluster.Name)
	case errors.As(err, &ne) && b.endpoint == "":
		return fmt.Errorf("%w (spec.backup.endpoint is the address the cluster reaches the store at: if this machine cannot reach it, give one it can with --endpoint)", err)
	}
	return err
}

// BackupListOptions holds the backup list command's flags.
type BackupListOptions struct {
	f *cmdutil.Factory
	bucketFlags

	Name string
}

// NewCmdBackupList lists a cluster's backups from its bucket.
func NewCmdBackupList(f *cmdutil.Factory, runF func(*BackupListOptions) error) *cobra.Command {
	o := &BackupListOptions{f: f}
	cmd := &cobra.Command{
		Use:   "list NAME",
		Short: "List the backups of a cluster in its bucket, newest first",
		Long: `List reads the cluster's bucket from where the command runs (spec.backup, and the keys from
the Secret it names, read through the API server) and lists every backup directory under
PREFIX NAMESPACE/NAME/backups/, newest first: when the copy finished (its data is as of then),
how long it took, the instance copied, the bytes stored, the GTID position and the server's
version, and its state:

  complete     its manifest, and every object the manifest records with its size
  damaged      an object the manifest records is missing or of another size: never restored
  unreadable   a manifest that is not valid, or that names another backup
  incomplete   objects but no manifest (the commit marker): a backup that failed or was
               aborted, or a delete that was interrupted; never restored
  running      the backup in status.backup.running

-o json or -o yaml prints the manifests of the backups, the IDs of incomplete directories, the
running backup's ID and the damaged or unreadable ones with why.`,
		Example: example(f,
			"# The backups of demo",
			"%[1]s backup list demo",
			"# As JSON, for a script",
			"%[1]s backup list demo -o json",
			"# From a workstation that reaches an in-cluster store through a port-forward",
			"%[1]s backup list demo --endpoint http://127.0.0.1:9000"),
		Args:              cmdutil.ExactArgs(1, "the NAME of the cluster"),
		ValidArgsFunction: backupArgsCompletion(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
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

// Run lists the backups.
func (o *BackupListOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openBucket(ctx, o.f, o.Name, o.Endpoint)
	if err != nil {
		return err
	}
	entries, err := catalog.ReadJudged(ctx, b.store, b.cluster)
	if err != nil {
		return b.explain(o.f, err)
	}
	ios := o.f.IOStreams
	if o.Output != cmdutil.OutputTable {
		return cmdutil.PrintStructured(ios.Out, o.Output, newBackupListOutput(b, entries))
	}
	if len(entries) == 0 {
		fmt.Fprintf(ios.ErrOut, "no backups of %s in %s\n", b.cluster.Name, b.location(""))
		return nil
	}
	// Where they are, for a restore from the bucket alone (--from-url) once the cluster is gone.
	fmt.Fprintf(ios.ErrOut, "backups of %s/%s in %s\n", b.cluster.Namespace, b.cluster.Name, b.location(""))
	t := cmdutil.NewTable(ios, "id", "taken", "duration", "source", "stored", "gtid", "version", "state")
	for _, row := range backupRows(ios, entries, b.running(), o.f.Clock()) {
		t.AddRow(row...)
	}
	return t.Render()
}

// backupListOutput is what -o json|yaml prints: a stable structure for scripts.
type backupListOutput struct {
	// Cluster is NAMESPACE/NAME.
	Cluster string `json:"cluster"`
	// Location is the directory of the cluster's backups, s3://BUCKET/PREFIX NAMESPACE/NAME/backups/.
	Location string `json:"location"`
	// Backups are the manifests of the backups (complete or damaged), newest first.
	Backups []backup.Manifest `json:"backups"`
	// Incomplete are the IDs of directories without a manifest, newest first.
	Incomplete []string `json:"incomplete"`
	// Running is the ID of status.backup.running.
	Running string `json:"running,omitempty"`
	// Damaged are the backups a restore would refuse (damaged or unreadable), with why.
	Damaged []backupProblems `json:"damaged"`
}

type backupProblems struct {
	ID       string        `json:"id"`
	State    catalog.State `json:"state"`
	Problems []string      `json:"problems"`
}

// newBackupListOutput shapes the entries (newest first) for -o json|yaml.
func newBackupListOutput(b *clusterBucket, entries []catalog.Entry) backupListOutput {
	out := backupListOutput{Cluster: b.cluster.Namespace + "/" + b.cluster.Name, Location: b.location(""), Running: b.runningID(),
		Backups: []backup.Manifest{}, Incomplete: []string{}, Damaged: []backupProblems{}}
	for _, e := range entries {
		if e.Manifest != nil {
			out.Backups = append(out.Backups, *e.Manifest)
		}
		if len(e.Problems) > 0 {
			out.Damaged = append(out.Damaged, backupProblems{ID: e.ID, State: e.State, Problems: e.Problems})
		}
		if (e.State == catalog.Incomplete || e.State == catalog.Running) && len(e.Listed) > 0 {
			out.Incomplete = append(out.Incomplete, e.ID)
		}
	}
	return out
}

// backupRows are the table's rows: on a terminal, ages and sizes for a person; otherwise RFC 3339
// times and byte counts for a script.
func backupRows(ios *iostreams.IOStreams, entries []catalog.Entry, run *v1.BackupRun, now time.Time) [][]string {
	tty := ios.IsStdoutTTY()
	size := func(n int64) string {
		if tty {
			return humanBytes(n)
		}
		return strconv.FormatInt(n, 10)
	}
	var rows [][]string
	for _, e := range entries {
		m := e.Manifest
		if m == nil {
			source := "-"
			if run != nil && e.State == catalog.Running && run.Source != "" {
				source = run.Source
			}
			rows = append(rows, []string{e.ID, "-", "-", source, size(e.ListedBytes()), "-", "-", string(e.State)})
			continue
		}
		taken := m.FinishedAt.UTC().Format(time.RFC3339)
		if tty {
			taken = duration.HumanDuration(now.Sub(m.FinishedAt)) + " ago"
		}
		var stored int64
		for _, o := range m.Objects {
			stored += o.Size
		}
		rows = append(rows, []string{e.ID, taken, m.FinishedAt.Sub(m.StartedAt).Round(time.Second).String(), m.Source,
			size(stored), dash(m.GTIDPosition), dash(m.ServerVersion), string(e.State)})
	}
	return rows
}

// backupArgsCompletion completes a cluster's NAME, then, with ids, the ID of one of its backups
// read from its bucket (nothing when the bucket cannot be read within the completion's bound).
func backupArgsCompletion(f *cmdutil.Factory, ids bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return clusterNames(cmd.Context(), f, toComplete), cobra.ShellCompDirectiveNoFileComp
		case len(args) == 1 && ids:
			return backupIDs(cmd.Context(), f, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// backupIDs lists the IDs of the cluster's backup directories that start with prefix, newest
// first.
func backupIDs(ctx context.Context, f *cmdutil.Factory, cluster, prefix string) []string {
	ctx, c, mc, cancel := completionCluster(ctx, f, cluster)
	defer cancel()
	if mc == nil {
		return nil
	}
	cfg, err := catalog.StoreConfig(ctx, c, mc)
	if err != nil {
		return nil
	}
	st, err := objectstore.New(cfg)
	if err != nil {
		return nil
	}
	objs, err := st.List(ctx, backup.Dir(mc.Namespace, mc.Name))
	if err != nil {
		return nil
	}
	l := backup.List(mc.Namespace, mc.Name, objs)
	var out []string
	for _, id := range slices.Concat(l.Complete, l.Incomplete) {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}
