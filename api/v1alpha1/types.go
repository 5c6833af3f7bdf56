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

// MysqlCluster is a MySQL (or MariaDB) primary/replica cluster managed by mysqlctl.
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

	// Spec is the desired cluster.
	Spec MysqlClusterSpec `json:"spec"`
	// Status is what mysqlctl observed and decided; written only through the status subresource.
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
// +kubebuilder:validation:XValidation:rule="!has(self.primaryService) || !has(self.replicaService) || self.primaryService != self.replicaService",message="primaryService and replicaService must be different names"
// +kubebuilder:validation:XValidation:rule="!has(self.semiSync) || !has(self.semiSync.enabled) || !self.semiSync.enabled || self.replicas == 1 || self.semiSync.waitForReplicas < self.replicas",message="semiSync.waitForReplicas must be less than replicas (the primary cannot acknowledge its own writes)"
type MysqlClusterSpec struct {
	// Image is the server container image, for example mysql:8.4 or mariadb:11.4.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?)/)?[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="image must be a valid image reference such as mysql:8.4, mariadb:11.4 or registry.example.com/db/mysql@sha256:<64 hex digits>"
	Image string `json:"image"`

	// Flavor selects the my.cnf dialect. When empty, clients set it from the image's repository
	// name (mariadb for a repository whose last path element contains "mariadb", mysql otherwise).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="flavor is immutable: a cluster cannot change between mysql and mariadb"
	Flavor Flavor `json:"flavor,omitempty"`

	// Replicas is the number of instances, primary included.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Storage is the persistent volume each instance gets.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Resources are the server container's resource requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// PrimaryService is the name of the Service that always selects the writable primary.
	// Defaults to NAME-primary; immutable once set because clients connect by this name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="primaryService must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="primaryService is immutable: clients connect by this name"
	PrimaryService string `json:"primaryService,omitempty"`

	// ReplicaService is the name of the Service that selects healthy replicas only.
	// Defaults to NAME-replicas; immutable once set.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="replicaService must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="replicaService is immutable: clients connect by this name"
	ReplicaService string `json:"replicaService,omitempty"`

	// CredentialsSecretName names the Secret holding the root, replication and orchestration
	// passwords. Created with random passwords when absent; an existing one is never overwritten.
	// Defaults to NAME-credentials; immutable once set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="credentialsSecretName must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="credentialsSecretName is immutable: the running servers use these credentials"
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// MysqlConfig holds extra my.cnf keys for the [mysqld] section. Keys that replication and
	// failover safety depend on are rendered by mysqlctl and refused here (see OwnedConfigKeys).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z0-9_.-]{1,64}$'))",message="mysqlConfig keys must be option names of 1-64 letters, digits, '_', '-' or '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.lowerAscii().replace('-', '_').matches('^((loose|skip|enable|disable|maximum)_)*((server_id|gtid_mode|enforce_gtid_consistency|gtid_strict_mode|gtid_domain_id|log_bin|log_slave_updates|log_replica_updates|read_only|super_read_only|bind_address|port|socket|datadir|relay_log|report_host|skip_slave_start|skip_replica_start|binlog_format|sync_binlog|innodb_flush_log_at_trx_commit|slave_net_timeout|replica_net_timeout)$|rpl_semi_sync)'))",message="mysqlConfig must not set options that mysqlctl manages for replication and failover safety (server_id, gtid_mode, enforce_gtid_consistency, gtid_strict_mode, gtid_domain_id, log_bin, log_slave_updates, log_replica_updates, read_only, super_read_only, bind_address, port, socket, datadir, relay_log, report_host, skip_slave_start, skip_replica_start, binlog_format, sync_binlog, innodb_flush_log_at_trx_commit, slave_net_timeout, replica_net_timeout, rpl_semi_sync_*, also with the loose-, skip-, enable-, disable- and maximum- prefixes); remove them"
	MysqlConfig map[string]string `json:"mysqlConfig,omitempty"`

	// SemiSync configures semi-synchronous replication, which is what lets a failover lose no
	// acknowledged transaction.
	// +kubebuilder:default={}
	// +optional
	SemiSync SemiSyncSpec `json:"semiSync,omitempty"`

	// Failover configures detection and automatic failover by `mysqlctl watch`.
	// +kubebuilder:default={}
	// +optional
	Failover FailoverSpec `json:"failover,omitempty"`

	// Paused stops every automatic action (watch still observes and reports).
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// StorageSpec is the persistent volume claimed per instance.
type StorageSpec struct {
	// StorageClassName is the StorageClass of each instance's PersistentVolumeClaim; empty uses
	// the cluster default.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size is the requested volume size as a Kubernetes quantity, for example 10Gi.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="storage.size must be a positive Kubernetes quantity such as 10Gi or 500Mi"
	// +optional
	Size string `json:"size,omitempty"`
}

// SemiSyncSpec configures semi-synchronous replication.
type SemiSyncSpec struct {
	// Enabled turns semi-synchronous replication on (the source side on the primary only, the
	// replica side on replicas).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// WaitForReplicas is how many replicas must acknowledge a commit before the client is answered.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=63
	// +optional
	WaitForReplicas int32 `json:"waitForReplicas,omitempty"`

	// Timeout is how long the primary waits for acknowledgements before it would fall back to
	// asynchronous replication. The default (24h) means it effectively never falls back, so a
	// commit is never acknowledged without a replica holding it.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="semiSync.timeout must be at least 1s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// FailoverSpec configures failure detection and automatic failover.
type FailoverSpec struct {
	// Auto lets `mysqlctl watch` fail over by itself when the primary is dead.
	// +kubebuilder:default=true
	// +optional
	Auto *bool `json:"auto,omitempty"`

	// DetectionInterval is how often the supervisor checks every instance.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('1m')",message="failover.detectionInterval must be between 100ms and 1m"
	// +optional
	DetectionInterval *metav1.Duration `json:"detectionInterval,omitempty"`

	// FailureThreshold is how many consecutive failed checks, agreed by the replicas, declare the
	// primary dead.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`

	// Cooldown is the minimum time between two automatic failovers (anti-flapping).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="failover.cooldown must not be negative"
	// +optional
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// MaxCandidateLag is the largest replication lag a failover candidate may have.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="failover.maxCandidateLag must not be negative"
	// +optional
	MaxCandidateLag *metav1.Duration `json:"maxCandidateLag,omitempty"`
}
