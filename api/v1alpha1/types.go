package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Flavor is the database family a cluster runs. It decides the my.cnf dialect, which must be
// rendered before any server exists; once servers run, the version they report is authoritative
// and a mismatch is an error condition, never guessed around.
// +kubebuilder:validation:Enum=mysql;mariadb
type Flavor string

const (
	// FlavorMySQL is Oracle MySQL 5.7, 8.0 or 8.4.
	FlavorMySQL Flavor = "mysql"
	// FlavorMariaDB is MariaDB 10.11 or later.
	FlavorMariaDB Flavor = "mariadb"
)

// MysqlCluster is a MySQL or MariaDB primary/replica cluster run by the mysqlctl CLI. There is no
// operator: `mysqlctl create` or `mysqlctl apply -f` creates it, mysqlctl commands and
// `mysqlctl watch` apply its StatefulSet, Services, ConfigMap and Secret and record every operation
// in its status, and `mysqlctl status NAME` shows it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=myc,categories=mysqlctl
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.currentPrimary`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MysqlCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Desired cluster: image, size, storage, Services, my.cnf options, semi-synchronous replication
	// and failover policy. Change it with `mysqlctl apply -f FILE`; each field says what a change
	// does to a running cluster.
	Spec MysqlClusterSpec `json:"spec"`
	// Observed state and operation records, written only by mysqlctl through the status
	// subresource; do not edit it by hand. An interrupted operation continues from what is recorded
	// here (`mysqlctl resume NAME`), and `mysqlctl status NAME` summarises it.
	Status MysqlClusterStatus `json:"status,omitempty"`
}

// MysqlClusterList is a list of MysqlCluster.
//
// +kubebuilder:object:root=true
type MysqlClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the clusters.
	Items []MysqlCluster `json:"items"`
}

// MysqlClusterSpec is the desired shape of a cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.primaryService) || has(self.primaryService)",message="primaryService cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.replicaService) || has(self.replicaService)",message="replicaService cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.credentialsSecretName) || has(self.credentialsSecretName)",message="credentialsSecretName cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.flavor) || has(self.flavor)",message="flavor cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="has(self.restore) == has(oldSelf.restore)",message="spec.restore is set only by 'mysqlctl restore' when it creates the cluster, and never removed"
// +kubebuilder:validation:XValidation:rule="!has(self.primaryService) || !has(self.replicaService) || self.primaryService != self.replicaService",message="primaryService and replicaService must be different names"
// +kubebuilder:validation:XValidation:rule="!has(self.semiSync) || !has(self.semiSync.enabled) || !self.semiSync.enabled || self.replicas == 1 || self.semiSync.waitForReplicas < self.replicas",message="semiSync.waitForReplicas must be less than replicas (the primary cannot acknowledge its own writes)"
type MysqlClusterSpec struct {
	// Server container image, for example mysql:8.4 or mariadb:11.4 (MySQL 5.7, 8.0 or 8.4, MariaDB
	// 10.11 or later); `mysqlctl create --image` sets it, default mysql:8.4. Change it with
	// `mysqlctl upgrade NAME --image IMAGE` (or `apply -f`, which starts the same upgrade): the
	// version rules are checked first, then pods restart one at a time, replicas first and the
	// primary last after its role is handed over. No pod restarts onto a new image by itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?)/)?[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="image must be a valid image reference such as mysql:8.4, mariadb:11.4 or registry.example.com/db/mysql@sha256:<64 hex digits>"
	Image string `json:"image"`

	// Server family, mysql or mariadb, which decides the my.cnf dialect. When empty,
	// `mysqlctl create` and `apply` set it from the image's repository name (mariadb when its last
	// path element contains "mariadb", mysql otherwise). Immutable; bootstrap refuses (exit code 4)
	// a server that reports the other family.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="flavor is immutable: a cluster cannot change between mysql and mariadb"
	Flavor Flavor `json:"flavor,omitempty"`

	// Number of instances (pods), primary included: 1 to 64, default 3 (`create --replicas`).
	// Change it with `mysqlctl scale NAME --replicas N` (or `apply -f`, which starts the same
	// scale): one instance at a time, a new one seeded (by replay or by copy) and joined as a
	// replica, a removed one detached first and its volume kept unless `scale --delete-data`. A
	// count that would remove the current primary's pod is refused (exit code 4): switch over to a
	// lower ordinal first.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Persistent volume of each instance, a PersistentVolumeClaim named data-POD. Set it at
	// creation: Kubernetes refuses changes to a StatefulSet's volume claim template, and mysqlctl
	// never resizes or moves an existing volume.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// CPU and memory requests and limits of the MySQL server container, as in a pod spec
	// (`create --requests cpu=500m,memory=1Gi --limits memory=2Gi`); empty sets none. Changing it
	// later only updates the StatefulSet's pod template: running pods are not restarted onto it.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Name of the Service that selects the writable primary (port 3306): applications send writes
	// to it. Defaults to NAME-primary, filled in by `mysqlctl create` and `apply`; cannot be
	// changed or removed once set, because clients connect by this name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="primaryService must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="primaryService is immutable: clients connect by this name"
	PrimaryService string `json:"primaryService,omitempty"`

	// Name of the Service that selects the replicas mysqlctl has proven healthy (port 3306), never
	// the primary or a quarantined instance: use it for reads. Defaults to NAME-replicas, filled in
	// by `mysqlctl create` and `apply`; cannot be changed or removed once set.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="replicaService must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="replicaService is immutable: clients connect by this name"
	ReplicaService string `json:"replicaService,omitempty"`

	// Name of the Secret with the passwords: root-password, replication-password and
	// orchestration-password (mysqlctl's own account), and the application accounts app-user,
	// app-password, app-readonly-user and app-readonly-password. Defaults to NAME-credentials;
	// created with random passwords when missing, never overwritten, and kept by `mysqlctl delete`
	// unless --delete-data. Cannot be changed or removed once set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="credentialsSecretName must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="credentialsSecretName is immutable: the running servers use these credentials"
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// Extra my.cnf options for the [mysqld] section, as option: "value" (for example
	// max_connections: "500"), at most 64. Options mysqlctl manages for replication and failover
	// safety (server_id, gtid_mode, log_bin, read_only, sync_binlog, rpl_semi_sync_* and the like)
	// are refused. They are rendered into the NAME-config-HASH ConfigMap by `create`, `apply` and
	// `reconcile`, and a server reads them only when its pod is next created: mysqlctl restarts
	// nothing.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z0-9_.-]{1,64}$'))",message="mysqlConfig keys must be option names of 1-64 letters, digits, '_', '-' or '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.lowerAscii().replace('-', '_').matches('^((loose|skip|enable|disable|maximum)_)*((server_id|gtid_mode|enforce_gtid_consistency|gtid_strict_mode|gtid_domain_id|log_bin|log_slave_updates|log_replica_updates|read_only|super_read_only|bind_address|port|socket|datadir|relay_log|report_host|skip_slave_start|skip_replica_start|binlog_format|sync_binlog|innodb_flush_log_at_trx_commit|slave_net_timeout|replica_net_timeout|extra_port|extra_max_connections|admin_address|admin_port|create_admin_listener_thread)$|rpl_semi_sync)'))",message="mysqlConfig must not set options that mysqlctl manages for replication and failover safety (server_id, gtid_mode, enforce_gtid_consistency, gtid_strict_mode, gtid_domain_id, log_bin, log_slave_updates, log_replica_updates, read_only, super_read_only, bind_address, port, socket, datadir, relay_log, report_host, skip_slave_start, skip_replica_start, binlog_format, sync_binlog, innodb_flush_log_at_trx_commit, slave_net_timeout, replica_net_timeout, extra_port, extra_max_connections, admin_address, admin_port, create_admin_listener_thread, rpl_semi_sync_*, also with the loose-, skip-, enable-, disable- and maximum- prefixes); remove them"
	MysqlConfig map[string]string `json:"mysqlConfig,omitempty"`

	// Semi-synchronous replication: a commit returns only once a replica has received it, which is
	// what lets a failover lose no acknowledged transaction. Applied whenever mysqlctl configures a
	// primary: bootstrap, `switchover`, `failover`, and `reconcile` after a spec change.
	// +kubebuilder:default={}
	// +optional
	SemiSync SemiSyncSpec `json:"semiSync,omitempty"`

	// Failure detection and automatic failover by `mysqlctl watch`, and the checks
	// `mysqlctl failover` makes before it acts. `watch` reads them at every check, so a change
	// applies without restarting it.
	// +kubebuilder:default={}
	// +optional
	Failover FailoverSpec `json:"failover,omitempty"`

	// Stops `mysqlctl watch` from acting on this cluster: it still checks the primary and records
	// status.ha, but fails over nothing, repairs nothing and leaves an interrupted operation for a
	// person (`mysqlctl resume NAME`). Default false (`create --paused`); commands a person runs
	// still work.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Where the cluster's backups go: an S3-compatible bucket and the Secret with its keys. A
	// backup is a physical copy of a replica's data directory, streamed by a Job on the replica's
	// node to BUCKET/PREFIX/NAMESPACE/NAME/backups/ID/, with a manifest written last. Absent: no
	// backups.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// The backup this cluster's data comes from, set by `mysqlctl restore` when it creates the
	// cluster; fixed from then on. Its first instance starts on a volume the backup was restored
	// into, its GTID history continues from the backup's position, and its other instances are
	// seeded from it. The bucket is spec.backup's.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.restore is fixed once the cluster exists"
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// RestoreSpec names the backup a new cluster is restored from, as its manifest records it.
type RestoreSpec struct {
	// Namespace of the cluster the backup was taken of.
	// +kubebuilder:validation:MaxLength=253
	SourceNamespace string `json:"sourceNamespace"`
	// Name of the cluster the backup was taken of.
	// +kubebuilder:validation:MaxLength=63
	SourceCluster string `json:"sourceCluster"`
	// UID of the cluster the backup was taken of, as its manifest records it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SourceUID string `json:"sourceUID,omitempty"`
	// ID of the backup, also its directory in the bucket.
	// +kubebuilder:validation:MaxLength=64
	BackupID string `json:"backupID"`
	// The backup's data object: its key below the bucket's prefix.
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key"`
	// The data object's size in bytes, as the manifest records it: the restore checks it.
	Size int64 `json:"size"`
	// SHA-256 of the data object, as the manifest records it: the restore checks every byte
	// against it and refuses an object that differs.
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`
	// The GTID position the backup is consistent at: the restored primary's history continues
	// from it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	GTIDPosition string `json:"gtidPosition,omitempty"`
	// Set for a restore from a bucket alone, when the accounts in the backup no longer open with
	// any Secret at hand (the source's Secret went with its namespace): the restore sets root's
	// password to this cluster's credentials Secret's before the server first starts, and the
	// bootstrap then sets every other account's, as it does for a new cluster.
	// +optional
	ResetPasswords bool `json:"resetPasswords,omitempty"`
	// Set when the backup is encrypted (the public keys it was encrypted to): the restore Job
	// decrypts it with the private key in the Secret NAME-restore-identity, which the restore
	// command creates from the identity file it is given and deletes once the data is in place.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	EncryptedTo []string `json:"encryptedTo,omitempty"`
}

// BackupSpec names the bucket backups go to.
type BackupSpec struct {
	// Name of the bucket (3 to 63 characters). mysqlctl never creates or deletes buckets.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket"`

	// A prefix of every key this cluster's backups are written under, for example team-a/ (default
	// none); the backups of NAMESPACE/NAME go to PREFIX NAMESPACE/NAME/backups/.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Prefix string `json:"prefix,omitempty"`

	// URL of an S3-compatible store, such as https://s3.example.com or http://10.0.0.5:9000;
	// empty for AWS S3 in region.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="backup.endpoint must be an http:// or https:// URL"
	Endpoint string `json:"endpoint,omitempty"`

	// The region requests are signed for (default us-east-1).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`

	// Addresses the bucket in the URL's path rather than its host name: most stores other than
	// AWS S3 need it.
	// +optional
	PathStyle bool `json:"pathStyle,omitempty"`

	// Name of the Secret, in the cluster's namespace, with the bucket's keys: access-key-id and
	// secret-access-key. They reach the backup Job from the Secret only, never as values.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialsSecretName string `json:"credentialsSecretName"`

	// When `watch` takes backups: a cron schedule of five fields (minute hour day-of-month month
	// day-of-week, in UTC; "0 3 * * *" is daily at 03:00) or a descriptor (@hourly, @daily,
	// @weekly, @monthly, @every 6h). Absent: backups are taken by `backup create` only. Two
	// backups never run at once: a schedule time that passes while a backup runs, or while no
	// watch supervises the cluster, is reported as missed (status.backup.schedule, an Event), and
	// one backup is taken for the latest time due.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9][0-9a-z.]*|[^@ ][^ ]*( +[^ ]+){4})$`
	Schedule string `json:"schedule,omitempty"`

	// Encrypts every backup on the client side, before it leaves the backup Job, to age public
	// keys: the cluster and `watch` hold only these, and a restore needs the private key of one
	// of them. Absent: backups are stored as the bucket stores them.
	// +optional
	Encryption *BackupEncryption `json:"encryption,omitempty"`

	// Which backups are kept: `watch` deletes the others after each scheduled backup that
	// succeeds, and `backup prune` on demand. Absent: every backup stays until deleted by hand.
	// +optional
	Retention *BackupRetention `json:"retention,omitempty"`

	// mysqlctl's container image, from which a backup Job copies the agent that streams the
	// backup (default mysqlctl:latest). The copy itself runs in the source pod's own server image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	AgentImage string `json:"agentImage,omitempty"`
}

// BackupEncryption names the public keys backups are encrypted to.
type BackupEncryption struct {
	// age X25519 public keys (age1…, as age-keygen prints them): each backup is encrypted to all
	// of them, and any one's private key restores it. Changing them changes the backups taken
	// after; older ones still need the keys they were taken with.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^age1[02-9ac-hj-np-z]{58}$`
	Recipients []string `json:"recipients"`
}

// BackupRetention says which complete backups are kept; a backup either rule would delete is kept
// when it is one of the newest minKeep. Directories left by a copy that failed or was aborted
// (no manifest) are deleted once a newer backup is complete; damaged and failed backups are left
// for a person.
// +kubebuilder:validation:XValidation:rule="has(self.keepLast) || has(self.maxAge)",message="backup.retention needs keepLast or maxAge (or both)"
type BackupRetention struct {
	// Keep the newest this many complete backups; older ones are deleted.
	// +optional
	// +kubebuilder:validation:Minimum=1
	KeepLast int32 `json:"keepLast,omitempty"`

	// Delete complete backups whose copy finished longer ago than this, for example 720h.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// However old, the newest this many complete backups are kept (default 1).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinKeep int32 `json:"minKeep,omitempty"`
}

// StorageSpec is the persistent volume claimed per instance. It is fixed once the cluster exists:
// a StatefulSet's volume claim templates cannot change, so a changed spec.storage is refused by the
// API server before anything else is written (volume expansion is not supported yet).
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storage.storageClassName is fixed once the cluster exists (its volumes were claimed with it)"
type StorageSpec struct {
	// StorageClass of each instance's volume (`create --storage-class`); absent uses the Kubernetes
	// cluster's default StorageClass. Fixed once the volumes exist.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Requested size of each instance's volume, a positive Kubernetes quantity such as 10Gi or
	// 500Mi (`create --storage-size`, default 10Gi). Fixed once the volumes exist.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="storage.size must be a positive Kubernetes quantity such as 10Gi or 500Mi"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",messageExpression="'storage.size is fixed once the cluster exists (volume expansion is not supported): it is ' + oldSelf"
	// +optional
	Size string `json:"size,omitempty"`
}

// SemiSyncSpec configures semi-synchronous replication.
type SemiSyncSpec struct {
	// Turns semi-synchronous replication on (default true; `create --semi-sync=false` turns it
	// off): the waiting side on the primary, the acknowledging side on replicas. A one-instance
	// cluster never uses it. Without it `failover` of an unreachable primary is refused unless
	// --force, and turning it off later does not switch it off on servers already running with it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Number of replica acknowledgements each commit waits for: 1 to 63 and less than replicas
	// (default 1, `create --semi-sync-wait-for`); MariaDB supports only 1. When fewer replicas can
	// acknowledge, the primary runs asynchronously and the cluster is Degraded (condition
	// SemiSynchronous False) until `reconcile` turns it on again.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=63
	// +optional
	WaitForReplicas int32 `json:"waitForReplicas,omitempty"`

	// How long the primary waits for an acknowledgement before it commits without one (asynchronous
	// fallback), as a duration such as 24h (the default) or 90m; at least 1s. A `failover` of an
	// unreachable primary stops every replica's receiver to fence it, which needs at least 1h here
	// and holds only this long after mysqlctl last saw the primary healthy (a running `watch` or
	// `reconcile` refreshes that).
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="semiSync.timeout must be at least 1s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// FailoverSpec configures failure detection and automatic failover.
type FailoverSpec struct {
	// Lets `mysqlctl watch` fail over by itself when it finds the primary dead (default true;
	// `create --auto-failover=false` turns it off). When false, `watch` only records
	// FailoverRequired in status.ha with the command to run, `mysqlctl failover NAME`.
	// +kubebuilder:default=true
	// +optional
	Auto *bool `json:"auto,omitempty"`

	// How often `mysqlctl watch` checks the primary, as a duration from 100ms to 1m (default 1s,
	// `create --detection-interval`); each check gives up after half of it. `mysqlctl failover`
	// spaces its confirming checks this far apart too.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('1m')",message="failover.detectionInterval must be between 100ms and 1m"
	// +optional
	DetectionInterval *metav1.Duration `json:"detectionInterval,omitempty"`

	// Consecutive failed checks of the same primary pod, 1 to 100 (default 3), after which `watch`
	// declares the primary dead, provided every reachable replica has lost it too.
	// `mysqlctl failover` checks the primary this many times before it proceeds. A refused
	// connection, a pod gone or a read-only answer after a restart is re-checked every sixteenth
	// of detectionInterval (at least 25ms), so it reaches the threshold within (threshold - 1)
	// of those; a silence must also last (threshold - 1) intervals less one check's timeout (half
	// an interval, at least 100ms).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`

	// Minimum time after a failover (or a failed automatic one) before `watch` fails over
	// automatically again, as a duration (default 5m; 0s turns it off). Inside it a dead primary
	// leaves the cluster Degraded with the command to run; `mysqlctl failover` run by a person
	// ignores it.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="failover.cooldown must not be negative"
	// +optional
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// Largest replication lag, as a duration (default 30s; 0s for no bound), that a replica may
	// have to be elected by a failover; a replica further behind is rejected and the reason
	// recorded. `switchover` does not use it.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="failover.maxCandidateLag must not be negative"
	// +optional
	MaxCandidateLag *metav1.Duration `json:"maxCandidateLag,omitempty"`

	// Lets `mysqlctl watch` (with failover.auto on) re-seed, with no person, an old primary that
	// a crash left holding transactions no replica received (default true). It does so once per
	// quarantine, and only when the evidence proves them never acknowledged to a client: the
	// failover that replaced it, started by the same watch process, proved no acknowledged
	// transaction lost under semi-sync; the server answering now is another process than the one
	// that watch last found writable and protected, started before any commit could return
	// unacknowledged; every other member ran since before that check and holds none of them; and
	// they are exactly its own transactions after the new primary's last one from it. The
	// discarded GTIDs are recorded in the rebuild's history record and an Event. When false, such
	// an instance stays quarantined until `mysqlctl rebuild NAME INSTANCE`.
	// +kubebuilder:default=true
	// +optional
	ReseedUnacknowledged *bool `json:"reseedUnacknowledged,omitempty"`
}
