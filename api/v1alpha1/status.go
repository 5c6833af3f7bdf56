package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is the one-word summary of a cluster's state.
type Phase string

// Phases, in the order a healthy cluster passes through them.
const (
	PhasePending       Phase = "Pending"
	PhaseBootstrapping Phase = "Bootstrapping"
	PhaseRunning       Phase = "Running"
	PhaseFailingOver   Phase = "FailingOver"
	PhaseSwitchingOver Phase = "SwitchingOver"
	PhaseUpgrading     Phase = "Upgrading"
	PhaseScaling       Phase = "Scaling"
	PhaseDegraded      Phase = "Degraded"
	PhaseDeleting      Phase = "Deleting"
)

// Condition types set on a MysqlCluster.
const (
	// ConditionReady is true when every instance is proven to replicate from the primary.
	ConditionReady = "Ready"
	// ConditionAvailable is true when a writable primary answers.
	ConditionAvailable = "Available"
	// ConditionDegraded is true when mysqlctl stopped because a step could not be proven safe.
	ConditionDegraded = "Degraded"
	// ConditionProgressing is true while an operation runs.
	ConditionProgressing = "Progressing"
	// ConditionSemiSynchronous is True when the primary is observed waiting for semi-sync
	// acknowledgements from enough replicas, False (and the cluster Degraded) when the spec asks
	// for semi-sync and the primary runs asynchronously.
	ConditionSemiSynchronous = "SemiSynchronous"
)

// Role is an instance's place in the replication topology.
type Role string

// Roles.
const (
	RolePrimary     Role = "primary"
	RoleReplica     Role = "replica"
	RoleQuarantined Role = "quarantined"
	RoleUnknown     Role = "unknown"
)

// HAState is the supervisor's view of the primary's health.
// +kubebuilder:validation:Enum=Healthy;Suspected;FailoverRequired;FailoverInProgress;Verifying;Degraded
type HAState string

// HA states (seed 000): Suspected becomes FailoverRequired only across checks of the same pod identity.
const (
	HAHealthy            HAState = "Healthy"
	HASuspected          HAState = "Suspected"
	HAFailoverRequired   HAState = "FailoverRequired"
	HAFailoverInProgress HAState = "FailoverInProgress"
	HAVerifying          HAState = "Verifying"
	HADegraded           HAState = "Degraded"
)

// FenceState says whether the old primary is proven unable to accept writes.
// +kubebuilder:validation:Enum=Pending;Verified;Blocked
type FenceState string

// Fence states.
const (
	FencePending  FenceState = "Pending"
	FenceVerified FenceState = "Verified"
	FenceBlocked  FenceState = "Blocked"
)

// UpgradeBarrier is the persisted step of a rolling image upgrade.
// +kubebuilder:validation:Enum=Preparing;TemplatePending;TemplateReady;ReplicasVerified;PrimaryReady
type UpgradeBarrier string

// Upgrade barriers, in order.
const (
	UpgradePreparing        UpgradeBarrier = "Preparing"
	UpgradeTemplatePending  UpgradeBarrier = "TemplatePending"
	UpgradeTemplateReady    UpgradeBarrier = "TemplateReady"
	UpgradeReplicasVerified UpgradeBarrier = "ReplicasVerified"
	UpgradePrimaryReady     UpgradeBarrier = "PrimaryReady"
)

// MysqlClusterStatus is what mysqlctl observed and decided. It is written only through the status
// subresource, one small change at a time under optimistic locking, so an interrupted operation
// can be resumed by any later invocation from exactly what is recorded here.
type MysqlClusterStatus struct {
	// One-word state: Bootstrapping, Running, SwitchingOver, FailingOver or Degraded (empty before
	// the first bootstrap), shown in the Phase column. Degraded means mysqlctl stopped because a
	// step could not be proven safe, or the cluster is not fully protected; the Degraded condition
	// says why. Written by mysqlctl; do not edit.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// The metadata.generation of the spec that the last bootstrap or converge verified. When it is
	// lower than metadata.generation the spec changed since: `mysqlctl reconcile NAME` converges
	// the cluster to it. Written by mysqlctl; do not edit.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Standard conditions, one per type. Ready: every instance is proven to replicate from the
	// primary; Available: a writable primary answers; Degraded: mysqlctl stopped or the cluster is
	// not fully protected (the message says why); Progressing: an operation runs; SemiSynchronous:
	// the primary waits for enough semi-sync acknowledgements. Written by mysqlctl; do not edit.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Pod name of the writable primary, such as demo-0 (the Primary column). Set by bootstrap,
	// `switchover` and `failover`, which also move the primary Service to this pod. Written by
	// mysqlctl; do not edit.
	// +optional
	CurrentPrimary string `json:"currentPrimary,omitempty"`
	// Instances proven healthy over spec.replicas, such as 3/3 (the Ready column), as of the last
	// bootstrap, converge or failover. Written by mysqlctl; do not edit.
	// +optional
	Ready string `json:"ready,omitempty"`
	// Number of instances, primary included, that the last bootstrap, converge or failover proved
	// healthy in their role. Written by mysqlctl; do not edit.
	// +optional
	ReadyInstances int32 `json:"readyInstances,omitempty"`
	// Every instance as mysqlctl last recorded it, one entry per pod, updated at the end of every
	// bootstrap, converge, switchover and failover; `mysqlctl status NAME` shows it. Written by
	// mysqlctl; do not edit.
	// +optional
	// +listType=map
	// +listMapKey=name
	Instances []InstanceStatus `json:"instances,omitempty"`
	// Provenance of every instance's data, recorded before the instance first joined replication
	// and never rewritten. Failover judges errant transactions against it, and an instance whose
	// data volume no longer matches its record is quarantined. Written by mysqlctl; do not edit.
	// +optional
	GTIDBootstrap []GTIDBootstrapRecord `json:"gtidBootstrap,omitempty"`
	// Identity of every instance that has ever been primary (the MySQL server_uuid, or server_id:N
	// on MariaDB): transactions they wrote are never counted as errant. Only ever appended to.
	// Written by mysqlctl; do not edit.
	// +optional
	KnownPrimaries []string `json:"knownPrimaries,omitempty"`
	// Health of the primary as `mysqlctl watch` judges it (failovers record it too), with the
	// evidence; `mysqlctl status NAME` shows it on its ha line. Written by mysqlctl; do not edit.
	// +optional
	HA *HAStatus `json:"ha,omitempty"`
	// The operation in progress, persisted stage by stage with its evidence; absent when none runs.
	// `mysqlctl resume NAME` continues an interrupted one, and `mysqlctl abort NAME` rolls back a
	// switchover or failover that has not promoted yet. Written by mysqlctl; do not edit.
	// +optional
	Operation *OperationStatus `json:"operation,omitempty"`
	// Up to 20 finished operations, newest first, each with its result, duration and message.
	// Written by mysqlctl; do not edit.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	History []OperationRecord `json:"history,omitempty"`
	// Quarantined instances: their data holds transactions no known primary wrote, or a history
	// that is not an ancestor of the primary's. They are labelled quarantined, kept out of both
	// Services and never elected; `mysqlctl rebuild NAME INSTANCE` re-seeds one from a healthy
	// replica and releases it (an instance being rebuilt is listed here too). Written by mysqlctl; do
	// not edit.
	// +optional
	ErrantInstances []ErrantInstance `json:"errantInstances,omitempty"`
	// Members that stopped answering (a lost pod, a quarantined replica that died, an old primary
	// that never came back), each with what it can hold: an upper bound on the transactions it
	// received. A failover proceeds past an absent member once its candidate holds the bound;
	// one with no bound blocks it. An entry goes when its member answers again. Written by
	// mysqlctl; do not edit.
	// +optional
	// +listType=map
	// +listMapKey=name
	AbsentInstances []AbsentInstance `json:"absentInstances,omitempty"`
	// The rolling upgrade in progress, or held by an abort (`mysqlctl upgrade`): its barrier, the
	// pod in flight and the pods done. While it is set, its partition is applied to the
	// StatefulSet and the PodDisruptionBudget allows no eviction. Written by mysqlctl; do not edit.
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
	// The scale in progress (`mysqlctl scale`, or `apply -f` of a new spec.replicas): the instance
	// count it moves from and to, the instance in flight and how its data was seeded. Present from
	// the scale's first stage to its last; while it is set the StatefulSet's replicas follow it,
	// not spec.replicas. Written by mysqlctl; do not edit.
	// +optional
	Scale *ScaleStatus `json:"scale,omitempty"`
	// The last request a supervising `mysqlctl watch` took from the mysqlctl.io/request annotation,
	// and its outcome. A switchover, failover, resume or abort typed while a watch supervises the
	// cluster is left there as a request, and the command follows its outcome here. Written by
	// mysqlctl; do not edit.
	// +optional
	Request *RequestStatus `json:"request,omitempty"`
	// Backups (`mysqlctl backup create`): the one running, the last that succeeded and the last
	// that failed. A backup has this slot of its own, never status.operation, so that it never
	// holds up a failover or a switchover. Written by mysqlctl; do not edit.
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`
	// The restore of spec.restore: when the data was put in place and when the primary's GTID
	// history was continued from the backup's position (the provenance of a restored cluster).
	// Written by mysqlctl; do not edit.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`
}

// RestoreStatus is how far the restore of spec.restore went.
type RestoreStatus struct {
	// ID of the backup restored (spec.restore.backupID).
	BackupID string `json:"backupID"`
	// The GTID position the restored data is consistent at, as the restore tool reported it.
	// +optional
	GTIDPosition string `json:"gtidPosition,omitempty"`
	// The Job that restored the data into the first instance's volume.
	// +optional
	Job string `json:"job,omitempty"`
	// When the data was in place in the first instance's volume.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
	// When the primary's binary log was started again at the backup's position.
	// +optional
	HistoryContinuedAt *metav1.Time `json:"historyContinuedAt,omitempty"`
}

// BackupStatus is the state of a cluster's backups.
type BackupStatus struct {
	// The backup in progress: its stage and its evidence.
	// +optional
	Running *BackupRun `json:"running,omitempty"`
	// The last backup that completed (its manifest is in the bucket).
	// +optional
	Last *BackupRecord `json:"last,omitempty"`
	// The last backup that failed, with why.
	// +optional
	LastFailure *BackupRecord `json:"lastFailure,omitempty"`
	// How spec.backup.schedule has been kept: the schedule time the last scheduled backup was
	// taken for, and the times missed.
	// +optional
	Schedule *BackupScheduleStatus `json:"schedule,omitempty"`
}

// BackupScheduleStatus is how watch kept the backup schedule.
type BackupScheduleStatus struct {
	// The schedule (spec.backup.schedule) this record is of; a new schedule starts a new record.
	Schedule string `json:"schedule"`
	// When watch began keeping it: times before are not due.
	Since metav1.Time `json:"since"`
	// The schedule time the last scheduled backup was taken for (or that a backup begun at or
	// after it served).
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// The next schedule time after it.
	// +optional
	Next *metav1.Time `json:"next,omitempty"`
	// Scheduled backups begun for lastScheduleTime: one that fails is retried, up to 3 in all,
	// a minute and then four minutes after the failure, while that is before next.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Schedule times no backup was taken for, since Since.
	// +optional
	Missed int32 `json:"missed,omitempty"`
	// The last schedule time missed.
	// +optional
	LastMissed *metav1.Time `json:"lastMissed,omitempty"`
	// Why it was missed.
	// +optional
	LastMissedReason string `json:"lastMissedReason,omitempty"`
}

// BackupRun is a backup in progress.
type BackupRun struct {
	// The backup's ID, also the name of its directory in the bucket.
	ID string `json:"id"`
	// The stage it is at: ChoosingSource, PreparingAccount, StartingJob or Copying.
	Stage string `json:"stage"`
	// The actor that runs it.
	// +optional
	Holder string `json:"holder,omitempty"`
	// When the backup began.
	StartedAt metav1.Time `json:"startedAt"`
	// The instance (pod) whose data is copied.
	// +optional
	Source string `json:"source,omitempty"`
	// Why that instance was chosen, with the evidence.
	// +optional
	SourceReason string `json:"sourceReason,omitempty"`
	// The Job that copies it.
	// +optional
	Job string `json:"job,omitempty"`
	// What the stage waits for, when it waits.
	// +optional
	Message string `json:"message,omitempty"`
	// The schedule time it is taken for (spec.backup.schedule); absent for `backup create`.
	// +optional
	ScheduledFor *metav1.Time `json:"scheduledFor,omitempty"`
	// The source asked for when it began (replica, primary or a pod's name): every actor that
	// takes it on chooses by it, never by its own.
	// +optional
	SourceRequest string `json:"sourceRequest,omitempty"`
}

// BackupRecord is a finished backup.
type BackupRecord struct {
	// The backup's ID, also the name of its directory in the bucket.
	ID string `json:"id"`
	// The instance (pod) whose data is copied.
	// +optional
	Source string `json:"source,omitempty"`
	// The GTID position the copy is consistent at.
	// +optional
	GTIDPosition string `json:"gtidPosition,omitempty"`
	// When the backup began.
	StartedAt metav1.Time `json:"startedAt"`
	// When it completed or failed.
	FinishedAt metav1.Time `json:"finishedAt"`
	// Bytes stored in the bucket (compressed).
	// +optional
	StoredBytes int64 `json:"storedBytes,omitempty"`
	// Bytes of data read from the instance.
	// +optional
	RawBytes int64 `json:"rawBytes,omitempty"`
	// Why it failed (failures only).
	// +optional
	Message string `json:"message,omitempty"`
	// The schedule time it was taken for; absent for `backup create`.
	// +optional
	ScheduledFor *metav1.Time `json:"scheduledFor,omitempty"`
}

// AnnotationRequest is where a command run while a watch supervises the cluster leaves its
// request (a Request in JSON) for that watch to carry out.
const AnnotationRequest = "mysqlctl.io/request"

// Request is an operation asked of the supervising watch.
type Request struct {
	// ID identifies the request; the outcome in status.request carries it.
	ID string `json:"id"`
	// Type is switchover, failover, upgrade, scale, rebuild, resume or abort.
	Type string `json:"type"`
	// To is the requested new primary (switchover, failover).
	To string `json:"to,omitempty"`
	// Force is failover --force.
	Force bool `json:"force,omitempty"`
	// Reason is the reason recorded with failover --force.
	Reason string `json:"reason,omitempty"`
	// Replicas is the instance count a scale request asks for.
	Replicas *int32 `json:"replicas,omitempty"`
	// DeleteData is scale --delete-data.
	DeleteData bool `json:"deleteData,omitempty"`
	// NoSwitchover is scale --no-switchover.
	NoSwitchover bool `json:"noSwitchover,omitempty"`
	// Instance is the replica a rebuild request re-seeds.
	Instance string `json:"instance,omitempty"`
	// Donor is rebuild --from.
	Donor string `json:"donor,omitempty"`
	// CatchUpTimeout bounds the candidate's catch-up (switchover, failover).
	CatchUpTimeout *metav1.Duration `json:"catchUpTimeout,omitempty"`
	// By is who asked (the requesting process's actor name).
	By string `json:"by,omitempty"`
	// At is when it was asked.
	At metav1.Time `json:"at"`
	// Deadline is when the requester stops waiting: a request not taken by then is never carried
	// out.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
}

// RequestState is where a request stands.
// +kubebuilder:validation:Enum=Accepted;Succeeded;Failed
type RequestState string

// Request states.
const (
	RequestAccepted  RequestState = "Accepted"
	RequestSucceeded RequestState = "Succeeded"
	RequestFailed    RequestState = "Failed"
)

// RequestStatus is a supervisor's answer to a request.
type RequestStatus struct {
	// Identifier of the request, as in the mysqlctl.io/request annotation that carried it.
	ID string `json:"id"`
	// Kind of request: switchover, failover, upgrade, scale, rebuild, resume or abort (unknown for
	// an annotation that did not parse).
	Type string `json:"type"`
	// Accepted while the supervisor carries the request out, then Succeeded or Failed.
	State RequestState `json:"state"`
	// The `mysqlctl watch` process that took the request, as mysqlctl@HOST/PID-NONCE.
	// +optional
	Holder string `json:"holder,omitempty"`
	// Transition count of the NAME-watch Lease when its holder took the request: only a supervisor
	// holding a newer one takes the request over, so one that lost its Lease cannot.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// What happened: the operation's result, or the error of a failed request.
	// +optional
	Message string `json:"message,omitempty"`
	// Kind of failure, which sets the requesting command's exit code: TimedOut (3), Unsafe (4),
	// Held (5) or Error (1); empty on success.
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// When the supervisor took the request.
	AcceptedAt metav1.Time `json:"acceptedAt"`
	// When the request ended; absent while it runs.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// One instance (pod) as mysqlctl last recorded it.
type InstanceStatus struct {
	// Pod name of the instance, such as demo-1.
	Name string `json:"name"`
	// StatefulSet ordinal of the pod (the number ending its name); its server_id is 1000 plus the
	// ordinal.
	Ordinal int32 `json:"ordinal"`
	// UID of the pod incarnation observed: failed checks count toward a failover only across checks
	// of one incarnation, and this one is used once the pod is gone.
	// +optional
	PodUID string `json:"podUID,omitempty"`
	// IP address the pod had when recorded, for information: replicas follow their primary by its
	// stable DNS name (POD.NAME-instances.NAMESPACE.svc), never by this address.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// True when the instance was last observed as a semi-synchronous source that cannot commit
	// without an acknowledgement (enabled and active, AFTER_SYNC, waiting with no replica
	// connected, timeout of at least 1h). Only then can a failover fence it by stopping every
	// replica's receiver.
	// +optional
	SemiSyncSource bool `json:"semiSyncSource,omitempty"`
	// Semi-sync source timeout the instance was observed with, in seconds; a failover's
	// receiver-fence deadline is computed from it.
	// +optional
	SemiSyncTimeoutSeconds int64 `json:"semiSyncTimeoutSeconds,omitempty"`
	// Place in the topology when recorded: primary, replica, quarantined, or unknown (an old
	// primary that is not serving). The pod's mysqlctl.io/role label carries the live role.
	// +optional
	Role Role `json:"role,omitempty"`
	// The server's server_id (1000 plus the ordinal), by which replicas identify their source.
	// +optional
	ServerID int64 `json:"serverID,omitempty"`
	// The MySQL server_uuid of the instance; empty on MariaDB, which has none.
	// +optional
	ServerUUID string `json:"serverUUID,omitempty"`
	// Server version as the server reports it (@@version), such as 8.4.3 or 10.11.9-MariaDB.
	// +optional
	Version string `json:"version,omitempty"`
	// Executed GTID set: gtid_executed on MySQL, gtid_current_pos on MariaDB.
	// +optional
	GTIDExecuted string `json:"gtidExecuted,omitempty"`
	// Replication lag in seconds as the server reported it; absent means unknown, never 0. A
	// failover rejects a candidate whose lag exceeds spec.failover.maxCandidateLag.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty"`
	// State of the replication receiver (IO) thread: Yes, No or Connecting; empty on the primary.
	// +optional
	IOThread string `json:"ioThread,omitempty"`
	// State of the replication applier (SQL) thread: Yes or No; empty on the primary.
	// +optional
	SQLThread string `json:"sqlThread,omitempty"`
	// Last receiver or applier error the server reported; empty when there is none.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Replication health when recorded: Primary, Replicating, Errant (quarantined) or Down (an old
	// primary that is not serving).
	// +optional
	Classification string `json:"classification,omitempty"`
	// Restart count of the pod's mysql container when recorded; `mysqlctl status` shows the live
	// count.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// When mysqlctl last observed the instance answering. For a primary seen waiting for semi-sync
	// acknowledgements, a running `watch` refreshes it every minute and `reconcile` at most hourly;
	// the failover's receiver-fence deadline counts from it.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
}

// Provenance of one instance's data, recorded once before it first joined replication.
type GTIDBootstrapRecord struct {
	// StatefulSet ordinal of the instance the record describes.
	Ordinal int32 `json:"ordinal"`
	// UID of the instance's PersistentVolumeClaim (data-POD) when recorded: a different UID later
	// means different data, and the instance is quarantined.
	PVCUID string `json:"pvcUID"`
	// Server identity when recorded: the MySQL server_uuid, or server_id:N on MariaDB.
	// +optional
	ServerUUID string `json:"serverUUID,omitempty"`
	// GTID set the instance held before it joined replication; these transactions are not counted
	// as errant.
	// +optional
	BootstrapGTIDSet string `json:"bootstrapGTIDSet,omitempty"`
	// When mysqlctl wrote the record.
	RecordedAt metav1.Time `json:"recordedAt"`
	// How the instance got its data: created (initialized empty with the cluster), replay (joined
	// empty and replays the primary's binary logs) or copy (a logical copy from the donor, loaded
	// without binary logging, starting at the donor's GTID position). Empty in records written
	// before mysqlctl recorded it.
	// +optional
	Method string `json:"method,omitempty"`
	// Pod the data was copied from, when method is copy.
	// +optional
	Donor string `json:"donor,omitempty"`
}

// ScaleStatus is the persisted state of a scale: the StatefulSet's replicas follow it while set.
type ScaleStatus struct {
	// Identifier of the scale operation.
	ID string `json:"id"`
	// Instance count when the scale started.
	From int32 `json:"from"`
	// Instance count the scale moves to.
	To int32 `json:"to"`
	// What happens to the instance of ordinal: add or remove (empty before the first one).
	// +optional
	Action string `json:"action,omitempty"`
	// StatefulSet ordinal of the instance being added or removed.
	Ordinal int32 `json:"ordinal"`
	// Pods the StatefulSet runs while the scale is set (its replicas), whatever spec.replicas says:
	// the scale moves it one instance at a time.
	Replicas int32 `json:"replicas"`
	// Delete the data volume of each removed instance (scale --delete-data); kept otherwise.
	// +optional
	DeleteData bool `json:"deleteData,omitempty"`
	// How the instance in flight gets its data: replay (the primary's binary logs still hold every
	// transaction) or copy (they do not: a copy from a donor); empty until decided.
	// +optional
	SeedMethod string `json:"seedMethod,omitempty"`
	// Why the seed method was chosen, with the evidence (the primary's purged GTID position).
	// +optional
	SeedReason string `json:"seedReason,omitempty"`
	// Pod the instance in flight is copied from (seedMethod copy).
	// +optional
	Donor string `json:"donor,omitempty"`
	// True once the instance in flight holds its data (replay chosen, or the copy finished): a
	// resumed scale goes on from the join, never copies again over a replica.
	// +optional
	Seeded bool `json:"seeded,omitempty"`
	// Name of the Job that copies the donor's data into the instance in flight.
	// +optional
	SeedJob string `json:"seedJob,omitempty"`
	// Pods added or removed so far, in order.
	// +optional
	Done []string `json:"done,omitempty"`
	// For a rebuild `watch` started by itself: the instance's transactions it discards, proven
	// never acknowledged to a client, and the evidence.
	// +optional
	Discard string `json:"discard,omitempty"`
	// Why those transactions were never acknowledged, one observation each.
	// +optional
	DiscardEvidence []string `json:"discardEvidence,omitempty"`
}

// HAStatus is the supervisor's persisted view of the primary's health.
type HAStatus struct {
	// Health of the primary: Healthy, Suspected, FailoverRequired, FailoverInProgress or Degraded.
	// Suspected: checks fail but death is not proven; FailoverRequired: it is dead, and `watch`
	// fails over or, when failover.auto is false or the cluster is paused, names the command to
	// run; Degraded: a failover was refused or is withheld, and the evidence says why. Verifying is
	// not written by this version.
	State HAState `json:"state"`
	// Observations behind the state, the reason first; `mysqlctl status` shows the first one.
	// +optional
	Evidence []string `json:"evidence,omitempty"`
	// UID of the primary pod incarnation under suspicion: failed checks count toward
	// failover.failureThreshold only across checks of the same pod.
	// +optional
	SuspectedPodUID string `json:"suspectedPodUID,omitempty"`
	// Consecutive failed checks of the primary, at least (quick re-checks of a refused or
	// restarted primary are recorded at most once a detection interval, and the count is then
	// brought up to date); a restarted `watch` continues this count when lastFailedCheck is
	// recent.
	// +optional
	FailedChecks int32 `json:"failedChecks,omitempty"`
	// When the newest failed check ended; a `watch` started later continues the count only within
	// three detection intervals of it.
	// +optional
	LastFailedCheck *metav1.Time `json:"lastFailedCheck,omitempty"`
	// When the current state was entered.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// When this record was last written from an observation of the primary, by the judge named
	// in judgedBy. A supervising `watch` rewrites it only when its judgement changes: while it
	// renews its NAME-watch Lease it stands behind the record as written, so `mysqlctl status`
	// takes the newer of this time and that Lease's last renewal as the last judgement, and
	// calls it stale once that is older than a minute (at least three detection intervals).
	// +optional
	JudgedAt *metav1.Time `json:"judgedAt,omitempty"`
	// What wrote this record: watch, bootstrap, converge (a `reconcile`, or the supervisor's
	// repairer), switchover or failover.
	// +optional
	JudgedBy string `json:"judgedBy,omitempty"`
	// When the last failover ended, or an automatic one failed; failover.cooldown counts from it.
	// +optional
	LastFailover *metav1.Time `json:"lastFailover,omitempty"`
	// When the supervisor's automatic failover was first refused the cluster's Lease by another
	// actor, in the current run of refusals; cleared once a failover starts or is no longer
	// called for. A converge run elsewhere that sees it, and sees the supervisor still rewriting
	// this record, gives way (it stops at its stage and releases the Lease).
	// +optional
	WaitingForLease *metav1.Time `json:"waitingForLease,omitempty"`
}

// OperationStatus is the operation in progress, persisted stage by stage.
type OperationStatus struct {
	// Identifier of the operation: its type and start time in Unix seconds, such as
	// failover-1767225600. The history record keeps it.
	ID string `json:"id"`
	// Kind of operation: bootstrap, converge (re-joining the replicas of a running cluster),
	// switchover or failover.
	Type string `json:"type"`
	// Next stage to run, such as WaitingForPods, Fencing, Promoting or RollingBack; a resumed
	// operation starts here.
	Stage string `json:"stage"`
	// The mysqlctl process running the operation (mysqlctl@HOST/PID-NONCE), holder of the
	// NAME-mysqlctl Lease; another process takes over only once that Lease expires (15 s).
	// +optional
	Holder string `json:"holder,omitempty"`
	// Transition count of the NAME-mysqlctl Lease when the holder took it: every write of the
	// operation is conditional on it, so a stale process's writes are refused.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// When the operation began, in whole seconds.
	StartedAt metav1.Time `json:"startedAt"`
	// When the operation began, with microsecond precision; durations are measured from it.
	// +optional
	StartedAtMicro *metav1.MicroTime `json:"startedAtMicro,omitempty"`
	// When mysqlctl last wrote this record.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
	// When the current stage began: every waiting stage has a time bound, counted from it.
	// +optional
	StageStartedAt *metav1.Time `json:"stageStartedAt,omitempty"`
	// The instance asked for with `switchover --to` or `failover --to`; empty lets mysqlctl choose.
	// A resumed operation keeps it.
	// +optional
	Target string `json:"target,omitempty"`
	// The request (mysqlctl.io/request annotation) that started the operation, if one did: a
	// supervisor that takes the request over continues this operation instead of starting another.
	// +optional
	RequestID string `json:"requestID,omitempty"`
	// What justified each decision so far: the fence, the candidate and why the others were
	// rejected.
	// +optional
	Evidence *OperationEvidence `json:"evidence,omitempty"`
	// Human-readable account of the current stage, such as what it waits for.
	// +optional
	Message string `json:"message,omitempty"`
}

// OperationEvidence records why an operation did what it did.
type OperationEvidence struct {
	// The old primary that was, or is being, fenced.
	// +optional
	FencedPrimary string `json:"fencedPrimary,omitempty"`
	// Pending (not fenced yet), Verified (proven unable to accept writes) or Blocked (no fence
	// could be proven: nothing is promoted unless forced).
	// +optional
	FenceState FenceState `json:"fenceState,omitempty"`
	// How the fence was applied, in words: over SQL (read_only or super_read_only, client sessions
	// killed) or by stopping every replica's receiver.
	// +optional
	FenceMethod string `json:"fenceMethod,omitempty"`
	// The old primary's executed GTID set when it was fenced over SQL: nothing past it was
	// acknowledged, and the candidate waits for it.
	// +optional
	FencedGTIDSet string `json:"fencedGTIDSet,omitempty"`
	// True when the old primary was last observed (not merely configured) as a semi-sync source
	// that waits for an acknowledgement before any commit returns: then a transaction no replica
	// received was never acknowledged to a client.
	// +optional
	SemiSyncProven bool `json:"semiSyncProven,omitempty"`
	// When the candidate was promoted; from then on the operation can no longer be rolled back or
	// aborted.
	// +optional
	PromotedAt *metav1.Time `json:"promotedAt,omitempty"`
	// When the fence was applied.
	// +optional
	FenceStartedAt *metav1.Time `json:"fenceStartedAt,omitempty"`
	// When a receiver fence stops holding: the old primary's semi-sync timeout counted from when it
	// was last seen healthy, minus a margin. Past it the old primary may commit without
	// acknowledgements, so no promotion happens after it and a resumed failover rolls back instead.
	// +optional
	FenceDeadline *metav1.Time `json:"fenceDeadline,omitempty"`
	// For a failover `watch` started by itself: when its last check found the old primary
	// writable and protected by semi-sync (waiting for acknowledgements, AFTER_SYNC, also with no
	// replica connected): the old primary was alive and protected until then.
	// +optional
	PrimaryCheckedAt *metav1.Time `json:"primaryCheckedAt,omitempty"`
	// When the server process that answered that check had started (the check's time minus its
	// uptime).
	// +optional
	PrimaryStartedAt *metav1.Time `json:"primaryStartedAt,omitempty"`
	// What the old primary had written to its binary log at that check (a GTID position).
	// +optional
	PrimaryCheckedGTID string `json:"primaryCheckedGTID,omitempty"`
	// The instance chosen to become primary.
	// +optional
	Candidate string `json:"candidate,omitempty"`
	// The candidate's received and executed GTID set at election; it applies all of it before it is
	// promoted.
	// +optional
	CandidateGTIDSet string `json:"candidateGTIDSet,omitempty"`
	// Why the candidate was chosen.
	// +optional
	CandidateReason string `json:"candidateReason,omitempty"`
	// Every other instance and why it was not chosen.
	// +optional
	Rejected []string `json:"rejected,omitempty"`
	// The reason a person gave with `failover --force --reason`; empty when not forced.
	// +optional
	Forced string `json:"forced,omitempty"`
	// What detection concluded about the old primary: Dead, ReadOnly (it answers read-only, as
	// after a restart), Unreachable or Alive.
	// +optional
	PrimaryVerdict string `json:"primaryVerdict,omitempty"`
	// Observations the verdict about the old primary was drawn from.
	// +optional
	Detection []string `json:"detection,omitempty"`
	// Why the operation is being rolled back (stage RollingBack).
	// +optional
	RollbackReason string `json:"rollbackReason,omitempty"`
	// Result the rollback ends with: Aborted (by `mysqlctl abort`) or Failed.
	// +optional
	RollbackResult string `json:"rollbackResult,omitempty"`
	// Number of the fenced primary's transactions the candidate still lacked when the catch-up
	// bound ran out (only when the old primary answered and was fenced over SQL).
	// +optional
	TransactionsMissing int64 `json:"transactionsMissing,omitempty"`
}

// One finished operation, kept in status.history.
type OperationRecord struct {
	// Identifier of the operation, such as switchover-1767225600.
	ID string `json:"id"`
	// The mysqlctl.io/request that started the operation, if one did.
	// +optional
	RequestID string `json:"requestID,omitempty"`
	// Kind of operation: bootstrap, converge, switchover or failover.
	Type string `json:"type"`
	// How the operation ended: Succeeded, Failed or Aborted.
	Result string `json:"result"`
	// When the operation began, in whole seconds.
	StartedAt metav1.Time `json:"startedAt"`
	// When the operation ended, in whole seconds.
	FinishedAt metav1.Time `json:"finishedAt"`
	// How long the operation took, in milliseconds.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
	// What happened and why, including any instance left not serving.
	// +optional
	Message string `json:"message,omitempty"`
	// Acknowledged transactions lost: 0 when proven none, -1 when unknown (a forced failover, or
	// semi-sync not proven); the message gives the bound.
	// +optional
	TransactionsLost int64 `json:"transactionsLost,omitempty"`
	// The primary a failover or switchover replaced.
	// +optional
	FormerPrimary string `json:"formerPrimary,omitempty"`
	// For a failover that proved, under semi-sync, that no acknowledged transaction was lost: when
	// the former primary was last observed healthy. With unacknowledgedUntil it bounds the window
	// in which the former primary's crash ends every commit still waiting for an acknowledgement.
	// +optional
	FormerPrimarySeenAt *metav1.Time `json:"formerPrimarySeenAt,omitempty"`
	// For such a failover started by `watch`: when its last check found the former primary
	// writable and protected by semi-sync (see operation.evidence.primaryCheckedAt).
	// +optional
	FormerPrimaryCheckedAt *metav1.Time `json:"formerPrimaryCheckedAt,omitempty"`
	// When the server process that answered that check had started.
	// +optional
	FormerPrimaryStartedAt *metav1.Time `json:"formerPrimaryStartedAt,omitempty"`
	// What the former primary had written to its binary log at that check (a GTID position).
	// +optional
	FormerPrimaryCheckedGTID string `json:"formerPrimaryCheckedGTID,omitempty"`
	// For such a failover: until when no commit of the former primary can have returned without a
	// replica's acknowledgement (its semi-sync timeout counted from formerPrimarySeenAt, minus a
	// margin). A transaction of the former primary that no replica received, whose session a
	// crash inside the window ended, was never acknowledged to a client.
	// +optional
	UnacknowledgedUntil *metav1.Time `json:"unacknowledgedUntil,omitempty"`
	// For a rebuild that `watch` started by itself: the transactions it discarded, proven never
	// acknowledged to a client (see spec.failover.reseedUnacknowledged).
	// +optional
	DiscardedGTIDs string `json:"discardedGTIDs,omitempty"`
}

// A member that does not answer, and what it can hold.
type AbsentInstance struct {
	// Pod name of the absent member.
	Name string `json:"name"`
	// When it was first found not answering.
	Since metav1.Time `json:"since"`
	// Why it is absent, and where its bound comes from.
	Reason string `json:"reason"`
	// An upper bound on what it received: the primary's GTID position (gtid_binlog_pos on
	// MariaDB, gtid_executed on MySQL) read after the member was last seen able to receive from
	// it. Empty when no bound is known: the member then blocks every automatic failover.
	// +optional
	Bound string `json:"bound,omitempty"`
	// When the member was last seen receiving from the primary (or, for an old primary, when it
	// was replaced).
	// +optional
	ReceivingAt *metav1.Time `json:"receivingAt,omitempty"`
}

// A quarantined instance and why it was quarantined.
type ErrantInstance struct {
	// Pod name of the quarantined instance.
	Name string `json:"name"`
	// Why mysqlctl quarantined the instance, with the evidence.
	Reason string `json:"reason"`
	// The transactions it holds that no known primary wrote.
	// +optional
	ErrantGTIDs string `json:"errantGTIDs,omitempty"`
	// Number of errant transactions the instance holds.
	// +optional
	Count int64 `json:"count,omitempty"`
	// When the instance was quarantined.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// When `watch` began re-seeding it by itself (see spec.failover.reseedUnacknowledged): it
	// tries once per quarantine, so a rebuild a person aborted, or one that was refused, is not
	// started again by itself.
	// +optional
	ReseedStartedAt *metav1.Time `json:"reseedStartedAt,omitempty"`
}

// UpgradeStatus is the persisted state of a rolling upgrade. It stays set from the upgrade's
// first stage to its last, also while the primary's role is handed over by a switchover between
// them; while it is set the PodDisruptionBudget allows no eviction.
type UpgradeStatus struct {
	// Identifier of the upgrade operation (it keeps it across the handoff switchover).
	// +optional
	ID string `json:"id,omitempty"`
	// When the upgrade started (its duration counts from here, across the handoff).
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Last barrier of the rolling upgrade passed: Preparing, TemplatePending, TemplateReady,
	// ReplicasVerified or PrimaryReady.
	Barrier UpgradeBarrier `json:"barrier"`
	// Image the cluster ran before the upgrade.
	// +optional
	FromImage string `json:"fromImage,omitempty"`
	// Image the upgrade moves the cluster to.
	// +optional
	ToImage string `json:"toImage,omitempty"`
	// StatefulSet rolling-update partition to apply: pods with a lower ordinal keep the old pod
	// template.
	// +optional
	Partition *int32 `json:"partition,omitempty"`
	// Name of the pod being restarted on the new template, or whose barrier is being proven.
	// +optional
	Pod string `json:"pod,omitempty"`
	// Primary that hands its role over, by switchover, before its own pod restarts.
	// +optional
	HandoffFrom string `json:"handoffFrom,omitempty"`
	// Replica the primary role is handed to: one already on the new template when there is one.
	// +optional
	HandoffTo string `json:"handoffTo,omitempty"`
	// Pods restarted on the new template and proven so far, in order.
	// +optional
	Done []string `json:"done,omitempty"`
	// Hash of the pod template the upgrade rolls out: the partition holds only for it.
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// Set once an abort ended the rollout: the partition keeps holding where it stopped (pods
	// keep the template they run, also when recreated) until 'upgrade' continues it.
	// +optional
	Held bool `json:"held,omitempty"`
	// Set by abort: the rollout ends, as Aborted, once the pod in flight has passed its barrier;
	// no further pod restarts.
	// +optional
	Stopping bool `json:"stopping,omitempty"`
}
