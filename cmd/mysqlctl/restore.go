package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// RestoreOptions holds the restore command's flags.
type RestoreOptions struct {
	f *cmdutil.Factory

	// Name is the new cluster; From is --from, SourceName and BackupID what it names, and
	// FromNamespace the source's namespace (--from-namespace; default the new cluster's).
	Name, From, SourceName, BackupID, FromNamespace string
	// FromURL is --from-url, a restore from the bucket alone, with the new cluster's spec
	// from File (-f); url is FromURL parsed.
	FromURL, File string
	url           backupURL
	// Identity is --identity, the age identity file that opens an encrypted backup; identities
	// what it holds (read once the backup is known to be encrypted).
	Identity string
	identity []byte
	// Image replaces the source's spec.image (default: the source's).
	Image    string
	Replicas int32
	Endpoint string
	Output   string
	Wait     bool
	Timeout  time.Duration
	Dialer   string
	DryRun   cmdutil.DryRun
}

// NewCmdRestore restores a backup into a new cluster.
func NewCmdRestore(f *cmdutil.Factory, runF func(*RestoreOptions) error) *cobra.Command {
	o := &RestoreOptions{f: f}
	cmd := &cobra.Command{
		Use:   "restore NEWNAME (--from NAME[/BACKUP] | --from-url s3://BUCKET/[PREFIX]NAMESPACE/NAME/backups/[BACKUP] -f FILE)",
		Short: "Restore a backup into a new cluster",
		Long: `Restore creates the cluster NEWNAME, with NAME's spec, from a backup of NAME: the newest complete
one, or BACKUP. The backup is read from NAME's bucket (spec.backup), and the new cluster keeps that
bucket for its own backups. Each stage is recorded in the new cluster's status.operation:

  RestoringData       a Job of the cluster's server image claims the first instance's volume,
                      downloads the backup (every byte checked against the manifest's SHA-256: a
                      damaged object is refused and named), prepares it and moves it in place
  StartingInstance    the StatefulSet gets its first instance, on the restored volume
  WaitingForPods      its server starts on the restored data
  ContinuingHistory   its binary log starts again at the backup's GTID position (before anything
                      is written to it), so the history continues from the backup's
  ...                 then the stages of a new cluster's bootstrap

Once the first instance is Running, the others (--replicas, default NAME's count) are added by a
scale: each is seeded from the restored primary and joined to it.

A restore never writes into an existing cluster: NEWNAME must not exist, or be the cluster an
earlier run of the same restore created (running the command again continues it; 'resume
NEWNAME' continues its recorded stage). Its volume must be new and empty.

The new cluster's credentials Secret is a copy of NAME's (the restored data holds NAME's accounts
and passwords, as they were when the backup was taken).

A backup encrypted to age public keys (spec.backup.encryption) needs --identity FILE, an age
identity file with the private key of one of them; it is refused before anything is made without
one. The keys of the file that open the backup are put in the Secret NEWNAME-restore-identity for
the restore Job, and deleted once the data is in place.

NEWNAME is made in the namespace of -n (the context's by default), and NAME is read from the same
namespace unless --from-namespace names another. Restored into another namespace, the new cluster
reads the bucket with the Secret its spec.backup names in its own namespace: it must exist there
first (the backup is listed with its keys before anything is created, so keys that cannot read the
bucket are refused at once).

With --from-url the backup is read from the bucket alone, when NAME is gone (its namespace
deleted, or another Kubernetes cluster): the URL is where 'backup list' said NAME's backups are,
with a BACKUP at its end or not (the newest complete one), and -f is a MysqlCluster manifest (the
one NAME was created from, say) whose spec the new cluster gets. Its spec.backup names the bucket
(the URL must be below its bucket and prefix) and the Secret with the bucket's keys, which must
exist in the new cluster's namespace. The new cluster's credentials Secret is the one there
already (NEWNAME-credentials, or the manifest's spec.credentialsSecretName), or one made with new
passwords: the restore sets root's password in the restored data to it before the server first
starts, and the bootstrap sets those of replication's, mysqlctl's and the application accounts.`,
		Example: example(f,
			"# Restore demo's newest complete backup into a new cluster demo-restored",
			"%[1]s restore demo-restored --from demo",
			"# Restore one backup, with one replica",
			"%[1]s restore demo-restored --from demo/20261207T001359Z-k3x9qa --replicas 2",
			"# Restore demo of namespace prod into the namespace staging (staging needs the bucket's Secret)",
			"%[1]s restore demo -n staging --from demo --from-namespace prod",
			"# Show which backup would be restored, and the new cluster, without creating anything",
			"%[1]s restore demo-restored --from demo --dry-run",
			"# demo's namespace is gone: restore its newest backup from the bucket, with the spec of demo.yaml",
			"%[1]s restore demo -n default --from-url s3://backups/default/demo/backups/ -f demo.yaml"),
		Args: cmdutil.ExactArgs(1, "the NEWNAME of the cluster to create"),
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
	fl := cmd.Flags()
	fl.StringVar(&o.From, "from", "", "The cluster whose backup is restored, as NAME (its newest complete backup) or NAME/BACKUP")
	fl.StringVar(&o.FromNamespace, "from-namespace", "", "With --from: the namespace of NAME (default: the new cluster's, that of -n)")
	fl.StringVar(&o.FromURL, "from-url", "", "Restore from the bucket alone: s3://BUCKET/[PREFIX]NAMESPACE/NAME/backups/[BACKUP], as 'backup list' prints it (needs -f)")
	fl.StringVarP(&o.File, "filename", "f", "", "With --from-url: a MysqlCluster manifest whose spec the new cluster gets (its spec.backup names the bucket)")
	fl.StringVar(&o.Identity, "identity", "", "An age identity file (age-keygen's, AGE-SECRET-KEY-1…) whose private key opens an encrypted backup; the keys of it that do are put in the Secret NEWNAME-restore-identity until the data is in place")
	fl.StringVar(&o.Image, "image", "", "The new cluster's server image (default: the source's spec.image); it must be of the backup's server series")
	fl.Int32Var(&o.Replicas, "replicas", 0, "Instances of the new cluster (default: as many as the source's spec.replicas)")
	fl.StringVar(&o.Endpoint, "endpoint", "", endpointUsage)
	addBootstrapWaiting(cmd, &o.Wait, true, &o.Timeout, defaultBackupTimeout)
	addDialerFlag(cmd, &o.Dialer)
	cmdutil.AddDryRunFlag(cmd, &o.DryRun, "Only show which backup would be restored into which new cluster: client (nothing is created)")
	cmdutil.AddOutputFlag(cmd, &o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
	return cmd
}

// validate checks the arguments and flags (a usage error for a bad value); it is pure.
func (o *RestoreOptions) validate() error {
	if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
		return cmdutil.FlagErrorf("NEWNAME %q is not a valid cluster name: %s", o.Name, strings.Join(errs, "; "))
	}
	switch {
	case o.From != "" && o.FromURL != "":
		return cmdutil.FlagErrorf("--from and --from-url cannot be combined: give one")
	case o.FromNamespace != "" && o.From == "":
		return cmdutil.FlagErrorf("--from-namespace is for --from (a --from-url names the namespace in its path)")
	case o.FromURL != "":
		if o.File == "" {
			return cmdutil.FlagErrorf("--from-url needs -f FILE: a MysqlCluster manifest whose spec the new cluster gets (the source cluster, and its spec, may be gone)")
		}
		u, err := parseBackupURL(o.FromURL)
		if err != nil {
			return err
		}
		o.url = u
		return o.validateCommon()
	case o.File != "":
		return cmdutil.FlagErrorf("-f is for --from-url: with --from the new cluster gets NAME's spec")
	case o.From == "":
		return cmdutil.FlagErrorf("--from (or --from-url) is required: the cluster whose backup is restored, as NAME or NAME/BACKUP")
	}
	name, id, _ := strings.Cut(o.From, "/")
	if name == "" || strings.Contains(id, "/") {
		return cmdutil.FlagErrorf("--from %q is not NAME or NAME/BACKUP", o.From)
	}
	if errs := validation.IsDNS1123Label(o.FromNamespace); o.FromNamespace != "" && len(errs) > 0 {
		return cmdutil.FlagErrorf("--from-namespace %q is not a valid namespace: %s", o.FromNamespace, strings.Join(errs, "; "))
	}
	if name == o.Name && o.FromNamespace == "" {
		return cmdutil.FlagErrorf("NEWNAME is the cluster the backup comes from: a restore creates a new cluster (restore in place is not supported)")
	}
	o.SourceName, o.BackupID = name, id
	return o.validateCommon()
}

// validateCommon checks the flags both ways of naming the backup share.
func (o *RestoreOptions) validateCommon() error {
	if o.Replicas < 0 {
		return cmdutil.FlagErrorf("--replicas %d: give a positive count, or leave it out for the source's", o.Replicas)
	}
	if err := validateTimeout(o.Timeout); err != nil {
		return err
	}
	return cmdutil.ValidateOutput(o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
}

// restoreOutput is what the command prints with -o json|yaml (and, as a table, without).
type restoreOutput struct {
	// Cluster is the new cluster, NAMESPACE/NEWNAME; From the source, NAMESPACE/NAME.
	Cluster string `json:"cluster"`
	From    string `json:"from"`
	// BackupID, its GTID position and when its copy finished (not read again when a restore
	// is continued).
	BackupID     string     `json:"backupID"`
	GTIDPosition string     `json:"gtidPosition"`
	BackupTaken  *time.Time `json:"backupTaken,omitempty"`
	Replicas     int32      `json:"replicas"`
	// Phase is the new cluster's phase once the command is done (empty for a dry run).
	Phase  string `json:"phase,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
}

// Run restores the backup into the new cluster (or continues the restore that created it).
func (o *RestoreOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.FromURL != "" {
		return o.runFromURL(ctx)
	}
	ns, err := o.f.Namespace()
	if err != nil {
		return err
	}
	c, src, err := loadClusterIn(ctx, o.f, o.FromNamespace, o.SourceName)
	if err != nil {
		return err
	}
	if src.Namespace == ns && src.Name == o.Name {
		return cmdutil.FlagErrorf("NEWNAME is the cluster the backup comes from (%s/%s): a restore creates a new cluster (restore in place is not supported)", ns, o.Name)
	}
	target, err := o.existingRestore(ctx, c, ns, src)
	if err != nil {
		return err
	}
	out := restoreOutput{Cluster: ns + "/" + o.Name, From: src.Namespace + "/" + src.Name, Replicas: o.replicas(src)}
	if target == nil {
		if err := namespaceExists(ctx, c, ns); err != nil {
			return err
		}
		m, obj, err := o.chooseBackup(ctx, c, src, ns)
		if err != nil {
			return err
		}
		target = restoreTarget(src, ns, o.Name, o.Image, m, obj)
		if err := sameSeries(m, target.Spec.Image); err != nil {
			return err
		}
		out.BackupTaken = &m.FinishedAt
	}
	out.BackupID, out.GTIDPosition = target.Spec.Restore.BackupID, target.Spec.Restore.GTIDPosition
	return o.createAndCarryOut(ctx, c, src, target, out, ensureSecretCopy)
}

// createAndCarryOut prints a dry run; otherwise it creates the new cluster and its Secret (with
// secret), or, for a cluster an earlier run created, makes sure of its Secret (a run killed before
// it was made, or a Secret changed since), then carries the restore out.
func (o *RestoreOptions) createAndCarryOut(ctx context.Context, c client.Client, src, target *v1.MysqlCluster, out restoreOutput,
	secret func(context.Context, client.Client, *v1.MysqlCluster, *v1.MysqlCluster) (bool, error),
) error {
	if target.Status.CurrentPrimary != "" && target.Status.Scale == nil && o.Replicas == 0 && target.Spec.Replicas != 1 {
		// Restored, and scaled since (a restore creates one instance): left at its count.
		out.Replicas = target.Spec.Replicas
	}
	if o.DryRun != cmdutil.DryRunNone {
		out.DryRun = true
		return o.print(out)
	}
	var err error
	if target.UID == "" {
		err = o.createTargetWith(ctx, c, src, target, secret)
	} else if _, err = secret(ctx, c, src, target); err == nil {
		err = o.ensureIdentity(ctx, c, target)
	}
	if err != nil {
		return err
	}
	return o.carryOut(ctx, c, target, out)
}

// carryOut runs the restore recorded in target (a bootstrap, then a scale to the count asked for)
// when --wait, and reports the outcome.
func (o *RestoreOptions) carryOut(ctx context.Context, c client.Client, target *v1.MysqlCluster, out restoreOutput) error {
	if !o.Wait {
		fmt.Fprintf(o.f.IOStreams.ErrOut, "The restore is carried out by 'reconcile %s'; 'scale %s --replicas %d' then adds the other instances.\n",
			o.Name, o.Name, out.Replicas)
		return o.print(out)
	}
	key := client.ObjectKeyFromObject(target)
	start := time.Now()
	stopProgress := followCopy(ctx, o.f, target.Namespace, func(ctx context.Context) string {
		now := &v1.MysqlCluster{}
		if c.Get(ctx, key, now) != nil || now.Status.Operation == nil || now.Status.Operation.Stage != orchestrate.StageRestoringData {
			return ""
		}
		return specs.RestoreJobName(now)
	}, func(line string) {
		fmt.Fprintf(o.f.IOStreams.ErrOut, "[%6.1fs] restoring data: %s\n", time.Since(start).Seconds(), line)
	})
	err := withRunner(ctx, o.f, target, o.Dialer, o.Timeout, func(ctx context.Context, r *orchestrate.Runner) error {
		if err := r.Bootstrap(ctx, key); err != nil {
			return err
		}
		now := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, now); err != nil {
			return err
		}
		if now.Status.Scale == nil && orchestrate.MemberCount(now) == out.Replicas {
			return nil
		}
		return r.Scale(ctx, key, orchestrate.ScaleOptions{Replicas: out.Replicas})
	})
	stopProgress()
	if err != nil {
		return err
	}
	return o.report(ctx, out)
}

// report prints the outcome: a cluster that is not Running after the restore is an
// outcome.ErrUnsafe error after it.
func (o *RestoreOptions) report(ctx context.Context, out restoreOutput) error {
	_, after, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	out.Phase = string(after.Status.Phase)
	if err := o.print(out); err != nil {
		return err
	}
	if after.Status.Phase != v1.PhaseRunning {
		return fmt.Errorf("%w: cluster %s is %s after the restore (see 'status %s')", outcome.ErrUnsafe, o.Name, after.Status.Phase, o.Name)
	}
	return nil
}

// existingRestore is NEWNAME, in namespace ns, as an earlier run of this restore created it (nil
// when there is no such cluster): one that exists and is not a restore of the source (or of
// another backup than the one named, or, from a bucket alone, one that keeps the source's
// passwords) is refused. A restore continued is that of its recorded backup, even when a newer one
// was taken since.
func (o *RestoreOptions) existingRestore(ctx context.Context, c client.Client, ns string, src *v1.MysqlCluster) (*v1.MysqlCluster, error) {
	existing := &v1.MysqlCluster{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.Name}, existing); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, cmdutil.ExplainAPIError(err)
	}
	rs, from := existing.Spec.Restore, o.From
	if o.FromURL != "" {
		from = o.FromURL
	}
	if rs == nil || rs.SourceCluster != src.Name || rs.SourceNamespace != src.Namespace || rs.ResetPasswords != (o.FromURL != "") || o.BackupID != "" && rs.BackupID != o.BackupID {
		return nil, fmt.Errorf("%w: MysqlCluster %s/%s already exists and is not a restore of %s: choose another NEWNAME",
			outcome.ErrInvalid, existing.Namespace, existing.Name, from)
	}
	fmt.Fprintf(o.f.IOStreams.ErrOut, "continuing the restore of backup %s into %s\n", rs.BackupID, existing.Name)
	return existing, nil
}

// replicas is the new cluster's instance count: --replicas, or the source's.
func (o *RestoreOptions) replicas(src *v1.MysqlCluster) int32 {
	if o.Replicas > 0 {
		return o.Replicas
	}
	return max(src.Spec.Replicas, 1)
}

func (o *RestoreOptions) print(out restoreOutput) error {
	ios := o.f.IOStreams
	if o.Output != cmdutil.OutputTable {
		return cmdutil.PrintStructured(ios.Out, o.Output, out)
	}
	if out.Phase == "" && !out.DryRun {
		_, err := fmt.Fprintf(ios.Out, "mysqlcluster.mysqlctl.io/%s created to restore backup %s of %s\n", o.Name, out.BackupID, out.From)
		return err
	}
	if out.DryRun {
		taken := ""
		if out.BackupTaken != nil {
			taken = "taken " + out.BackupTaken.UTC().Format(time.RFC3339) + ", "
		}
		_, err := fmt.Fprintf(ios.Out, "would restore backup %s of %s (%sGTID %s) into %s of %d instance(s) (dry run)\n",
			out.BackupID, out.From, taken, out.GTIDPosition, out.Cluster, out.Replicas)
		return err
	}
	_, err := fmt.Fprintf(ios.Out, "restored backup %s of %s (GTID %s) into %s: %d instance(s), %s\n",
		out.BackupID, out.From, out.GTIDPosition, out.Cluster, out.Replicas, out.Phase)
	return err
}

// chooseBackup reads the source's bucket, with the keys the new cluster will read it with (the
// Secret of the source's spec.backup in namespace ns, the new cluster's), and returns the backup to
// restore: BACKUP, or the newest complete one. Only a complete physical backup of this very
// cluster is restored.
func (o *RestoreOptions) chooseBackup(ctx context.Context, c client.Client, src *v1.MysqlCluster, ns string) (*backup.Manifest, backup.Object, error) {
	if src.Spec.Backup == nil {
		return nil, backup.Object{}, catalog.NoBackupSpec(src)
	}
	b, err := o.bucketIn(ctx, c, src, ns)
	if err != nil {
		return nil, backup.Object{}, err
	}
	return o.chooseIn(ctx, src, b)
}

// namespaceExists refuses a namespace that does not exist before anything is created in it (one
// this user may not read is left for the creation to judge).
func namespaceExists(ctx context.Context, c client.Client, ns string) error {
	err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the namespace %s does not exist: create it ('kubectl create namespace %s'), or restore into another with -n", outcome.ErrInvalid, ns, ns)
	}
	return nil
}

// chooseIn is chooseBackup in the bucket b holds src's backups in.
func (o *RestoreOptions) chooseIn(ctx context.Context, src *v1.MysqlCluster, b *clusterBucket) (*backup.Manifest, backup.Object, error) {
	var e catalog.Entry
	var err error
	if o.BackupID != "" {
		if e, err = catalog.ReadOne(ctx, b.store, src.Namespace, src.Name, o.BackupID, b.runningID()); err != nil {
			return nil, backup.Object{}, b.explain(o.f, err)
		}
		e = e.Judge(src)
	} else {
		entries, err := catalog.Read(ctx, b.store, src.Namespace, src.Name, b.runningID())
		if err != nil {
			return nil, backup.Object{}, b.explain(o.f, err)
		}
		if e, err = newestComplete(src, entries, b.location("")); err != nil {
			return nil, backup.Object{}, err
		}
	}
	if e.State != catalog.Complete {
		return nil, backup.Object{}, fmt.Errorf("%w: backup %s of %s is %s, and only a complete backup is restored: %s ('%s backup describe %s %s' shows it)",
			outcome.ErrUnsafe, e.ID, src.Name, e.State, strings.Join(e.Problems, "; "), o.f.DisplayName, src.Name, e.ID)
	}
	m := e.Manifest
	if enc := m.Encryption; enc != nil {
		if err := o.readIdentity(m.ID, enc.Recipients); err != nil {
			return nil, backup.Object{}, err
		}
	}
	if m.Method != backup.MethodPhysical || m.Flavor != string(specs.Flavor(src)) || len(m.Objects) != 1 {
		return nil, backup.Object{}, fmt.Errorf("%w: backup %s of %s is a %s backup of %s with %d object(s): this mysqlctl restores a physical MariaDB backup of one object only",
			outcome.ErrInvalid, m.ID, src.Name, m.Method, m.Flavor, len(m.Objects))
	}
	return m, m.Objects[0], nil
}

// readIdentity reads --identity for backup id, encrypted to recipients, and refuses a missing
// file, or one none of whose private keys is of one of the recipients (before anything is made).
func (o *RestoreOptions) readIdentity(id string, recipients []string) error {
	if o.Identity == "" {
		return fmt.Errorf("%w: backup %s is encrypted (age, to %s): give --identity FILE, an age identity file with the private key of one of them",
			outcome.ErrInvalid, id, strings.Join(recipients, ", "))
	}
	b, err := os.ReadFile(o.Identity)
	if err != nil {
		return fmt.Errorf("%w: --identity: %v", outcome.ErrInvalid, err)
	}
	ids, err := seal.ParseIdentities(string(b))
	if err != nil {
		return fmt.Errorf("--identity %s: %w", o.Identity, err)
	}
	if !ids.Opens(recipients) {
		return fmt.Errorf("%w: --identity %s holds the private keys of %s, and backup %s is encrypted to %s: none of them opens it",
			outcome.ErrInvalid, o.Identity, strings.Join(ids.Public(), ", "), id, strings.Join(recipients, ", "))
	}
	only, _ := ids.Only(recipients)
	o.identity = []byte(only)
	return nil
}

// ensureIdentity gives a restore of an encrypted backup whose data is not in place yet the
// Secret with the private key its Job decrypts with: only the keys of the file that are among the
// backup's recipients, owned by the new cluster, and deleted by the restore once the data is in
// place. Without --identity an existing Secret is used as it is.
func (o *RestoreOptions) ensureIdentity(ctx context.Context, c client.Client, target *v1.MysqlCluster) error {
	rs := target.Spec.Restore
	if len(rs.EncryptedTo) == 0 || !specs.RestorePending(target) {
		return nil
	}
	if o.identity == nil {
		if o.Identity == "" {
			return nil // the restore says what is missing, if it is
		}
		if err := o.readIdentity(rs.BackupID, rs.EncryptedTo); err != nil {
			return err
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: specs.RestoreIdentitySecretName(target),
		Labels:          map[string]string{specs.LabelInstance: target.Name, specs.LabelManagedBy: specs.FieldOwner, specs.LabelComponent: specs.RestoreComponent},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(target, v1.GroupVersion.WithKind("MysqlCluster"))}},
		Data: map[string][]byte{specs.RestoreIdentityKey: o.identity}}
	err := c.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, s)
	}
	if err != nil {
		// The error names the object, never its data.
		return errors.New("write Secret " + s.Namespace + "/" + s.Name + ": " + string(apierrors.ReasonForError(err)))
	}
	return nil
}

// deleteIdentity deletes the restore's private key of a cluster this run made and is undoing: not
// left to the garbage collector, which would keep it a while longer.
func deleteIdentity(ctx context.Context, c client.Client, target *v1.MysqlCluster) {
	_ = c.Delete(context.WithoutCancel(ctx), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: specs.RestoreIdentitySecretName(target)}})
}

// newestComplete is the newest complete backup among the entries (IDs sort by time).
func newestComplete(src *v1.MysqlCluster, entries []catalog.Entry, location string) (catalog.Entry, error) {
	var best *catalog.Entry
	for i := range entries {
		e := entries[i].Judge(src)
		if e.State == catalog.Complete && (best == nil || e.ID > best.ID) {
			best = &e
		}
	}
	if best == nil {
		return catalog.Entry{}, fmt.Errorf("%w: %s holds no complete backup of %s ('backup list %s' shows what it holds; 'backup create %s' takes one)",
			outcome.ErrInvalid, location, src.Name, src.Name, src.Name)
	}
	return *best, nil
}

// restoreTarget is the new cluster, NEWNAME in namespace ns: the source's spec (image, when set, replacing its image), one
// instance (the others are added by a scale once it runs), and spec.restore naming the backup.
func restoreTarget(src *v1.MysqlCluster, ns, name, image string, m *backup.Manifest, obj backup.Object) *v1.MysqlCluster {
	t := &v1.MysqlCluster{}
	t.Name, t.Namespace = name, ns
	t.Spec = *src.Spec.DeepCopy()
	t.Spec.Replicas = 1
	t.Spec.Restore = &v1.RestoreSpec{
		SourceNamespace: m.Namespace, SourceCluster: m.Cluster, SourceUID: m.ClusterUID, BackupID: m.ID,
		Key: backup.Key(m.Namespace, m.Cluster, m.ID, obj.Name), Size: obj.Size, SHA256: obj.SHA256, GTIDPosition: m.GTIDPosition,
	}
	if m.Encryption != nil {
		t.Spec.Restore.EncryptedTo = slices.Clone(m.Encryption.Recipients)
	}
	// Objects the source names are the source's: the new cluster gets its own Services and its
	// own copy of the credentials (NEWNAME-credentials, see copySecret), never the source's.
	t.Spec.PrimaryService, t.Spec.ReplicaService, t.Spec.CredentialsSecretName = "", "", ""
	// The backup's flavor, whatever another image's name would suggest.
	t.Spec.Flavor = specs.Flavor(src)
	if image != "" {
		t.Spec.Image = image
	}
	return t
}

// createTargetWith creates the new cluster's Secret (with secret: a copy of the source's, or its
// own), then the cluster and its derived objects (its StatefulSet with no instance until the data
// is restored). Anything this run created is removed again when a later step fails.
func (o *RestoreOptions) createTargetWith(ctx context.Context, c client.Client, src, target *v1.MysqlCluster,
	secret func(context.Context, client.Client, *v1.MysqlCluster, *v1.MysqlCluster) (bool, error),
) error {
	probe := target.DeepCopy()
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	if len(target.Spec.Restore.EncryptedTo) > 0 && len(probe.Spec.Restore.EncryptedTo) == 0 {
		// An older CRD drops the field it does not know: the Job would not decrypt.
		return fmt.Errorf("%w: the MysqlCluster CRD of this Kubernetes cluster predates encrypted backups (it drops spec.restore.encryptedTo): run '%s install' to update it, then run this command again",
			outcome.ErrConfig, o.f.DisplayName)
	}
	// The Secret first: a run killed after it leaves a copy the next run takes as its own.
	secretCreated, err := secret(ctx, c, src, target)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, target); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another run created it meanwhile: its Secret is this copy, kept.
			return fmt.Errorf("%w: MysqlCluster %s/%s was created meanwhile (another restore running?): run the command again to continue it", outcome.ErrHeld, target.Namespace, target.Name)
		}
		return undoCreated(ctx, c, nil, secretSelf(target, secretCreated), cmdutil.ExplainAPIError(err))
	}
	if err := o.ensureIdentity(ctx, c, target); err != nil {
		deleteIdentity(ctx, c, target)
		return undoCreated(ctx, c, target, secretSelf(target, secretCreated), err)
	}
	if _, err := orchestrate.ApplyDerived(ctx, c, target, specs.Convergence{}); err != nil {
		deleteIdentity(ctx, c, target)
		return undoCreated(ctx, c, target, secretSelf(target, secretCreated), cmdutil.ExplainAPIError(err))
	}
	if o.Wait {
		// Progress; without --wait, the result printed is this line.
		fmt.Fprintf(o.f.IOStreams.ErrOut, "mysqlcluster.mysqlctl.io/%s created to restore backup %s of %s\n", target.Name, target.Spec.Restore.BackupID, src.Namespace+"/"+src.Name)
	}
	return nil
}

// secretSelf is the new cluster's Secret when this run created it (nil otherwise).
func secretSelf(target *v1.MysqlCluster, created bool) *corev1.Secret {
	if !created {
		return nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: specs.SecretName(target)}}
}

// undoCreated removes what a failed run created (the cluster, with its owned objects, then its
// Secret, only once the cluster is gone) and says so with cause; what it could not remove is named.
func undoCreated(ctx context.Context, c client.Client, cluster *v1.MysqlCluster, secret *corev1.Secret, cause error) error {
	ctx = context.WithoutCancel(ctx)
	if cluster != nil {
		if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (the cluster it created could not be removed: %v; delete it with 'delete %s --delete-data')", cause, err, cluster.Name)
		}
	}
	if secret != nil {
		if err := c.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (the Secret %s it created could not be removed: %v)", cause, secret.Name, err)
		}
	}
	return fmt.Errorf("%w (what this run created was removed again)", cause)
}

// ensureSecretCopy makes the new cluster's credentials Secret (NEWNAME-credentials) a copy of the
// source's: the restored data holds the source's accounts and passwords. An existing one is kept
// only when its passwords are the source's (a copy an earlier run made); any other is refused.
func ensureSecretCopy(ctx context.Context, c client.Client, src, target *v1.MysqlCluster) (bool, error) {
	from := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: specs.SecretName(src)}, from); err != nil {
		return false, fmt.Errorf("read the credentials Secret of %s: %w", src.Name, cmdutil.ExplainAPIError(err))
	}
	if missing := specs.MissingSecretKeys(from); len(missing) > 0 {
		return false, fmt.Errorf("%w: the credentials Secret %s/%s of %s lacks %v: the restored data needs %s's passwords, and they are not all there",
			outcome.ErrInvalid, from.Namespace, from.Name, src.Name, missing, src.Name)
	}
	s, err := specs.BuildSecret(target)
	if err != nil {
		return false, err
	}
	s.Data = maps.Clone(from.Data)
	err = c.Create(ctx, s)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		// The error names the object, never its data.
		return false, errors.New("create Secret " + s.Namespace + "/" + s.Name + ": " + string(apierrors.ReasonForError(err)))
	}
	have := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), have); err != nil {
		return false, cmdutil.ExplainAPIError(err)
	}
	for _, k := range append(slices.Clone(specs.SecretKeys), specs.AppSecretKeys...) {
		if !bytes.Equal(have.Data[k], from.Data[k]) {
			return false, fmt.Errorf("%w: Secret %s/%s exists and its %s is not %s's: the restored data opens only with %s's passwords; delete the Secret, or choose another NEWNAME",
				outcome.ErrInvalid, s.Namespace, s.Name, k, src.Name, src.Name)
		}
	}
	return false, nil
}

// sameSeries refuses a backup taken on another server series than the image's (a physical backup
// is prepared by the image's own mariadb-backup, which reads only its series' files). A tag that
// names a series (10.11, 10.11.9, 10.11-jammy) must name the backup's; one that names only a major
// (11) must name its major. A tag that names no MariaDB version (a digest, latest, lts, or a
// version below 10: an image of one's own numbering) is not checked.
func sameSeries(m *backup.Manifest, image string) error {
	ref := image[strings.LastIndex(image, "/")+1:]
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	_, tag, ok := strings.Cut(ref, ":")
	want := seriesOf(m.ServerVersion)
	major, series := versionOf(tag)
	if !ok || want == "" || major < 10 {
		return nil
	}
	wantMajor, _, _ := strings.Cut(want, ".")
	if series == want || series == "" && strconv.Itoa(major) == wantMajor {
		return nil
	}
	return fmt.Errorf("%w: backup %s was taken on %s (series %s) and the new cluster's image is %s: a physical backup restores only into its own series; give --image with a %s image (and upgrade after)",
		outcome.ErrInvalid, m.ID, m.ServerVersion, want, image, want)
}

// seriesOf is the MAJOR.MINOR a version starts with ("" when it starts otherwise).
func seriesOf(v string) string {
	_, series := versionOf(v)
	return series
}

// versionOf reads the MAJOR[.MINOR] a version or tag starts with: the major (-1 when it does not
// start with one) and MAJOR.MINOR ("" without a minor).
func versionOf(v string) (int, string) {
	digits := func(s string) string {
		i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
		if i < 0 {
			return s
		}
		return s[:i]
	}
	maj := digits(v)
	n, err := strconv.Atoi(maj)
	if err != nil {
		return -1, ""
	}
	rest := v[len(maj):]
	if !strings.HasPrefix(rest, ".") {
		return n, ""
	}
	if minor := digits(rest[1:]); minor != "" {
		return n, maj + "." + minor
	}
	return n, ""
}
