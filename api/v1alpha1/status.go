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
	// Phase summarises the cluster's state.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Available, Degraded and Progressing.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// CurrentPrimary is the pod name of the writable primary.
	// +optional
	CurrentPrimary string `json:"currentPrimary,omitempty"`
	// Ready is "ready/desired" instances, for the printer column.
	// +optional
	Ready string `json:"ready,omitempty"`
	// ReadyInstances counts instances proven healthy in their role.
	// +optional
	ReadyInstances int32 `json:"readyInstances,omitempty"`
	// Instances is the last observation of every instance.
	// +optional
	// +listType=map
	// +listMapKey=name
	Instances []InstanceStatus `json:"instances,omitempty"`
	// GTIDBootstrap is the append-only provenance of every instance, recorded before it first
	// joined replication. Election judges errant transactions against it; entries are never rewritten.
	// +optional
	GTIDBootstrap []GTIDBootstrapRecord `json:"gtidBootstrap,omitempty"`
	// KnownPrimaries are the identities (MySQL server_uuid, MariaDB "server_id:N") of every
	// instance that has been primary: their transactions are never errant.
	// +optional
	KnownPrimaries []string `json:"knownPrimaries,omitempty"`
	// HA is the supervisor's view of the primary's health.
	// +optional
	HA *HAStatus `json:"ha,omitempty"`
	// Operation is the operation in progress, if any.
	// +optional
	Operation *OperationStatus `json:"operation,omitempty"`
	// History keeps the last finished operations, newest first.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	History []OperationRecord `json:"history,omitempty"`
	// ErrantInstances are quarantined instances: they hold transactions no known primary produced
	// (or their history is not an ancestor of the primary's) and are kept out of the replica Service.
	// +optional
	ErrantInstances []ErrantInstance `json:"errantInstances,omitempty"`
	// Upgrade is the persisted state of a rolling upgrade, if one is in progress.
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
	// Request is the last request a supervisor (watch) took from the mysqlctl.io/request
	// annotation, and its outcome: the command that left it follows it here.
	// +optional
	Request *RequestStatus `json:"request,omitempty"`
}

// AnnotationRequest is where a command run while a watch supervises the cluster leaves its
// request (a Request in JSON) for that watch to carry out.
const AnnotationRequest = "mysqlctl.io/request"

// Request is an operation asked of the supervising watch.
type Request struct {
	// ID identifies the request; the outcome in status.request carries it.
	ID string `json:"id"`
	// Type is switchover, failover, resume or abort.
	Type string `json:"type"`
	// To is the requested new primary (switchover, failover).
	To string `json:"to,omitempty"`
	// Force and Reason are failover --force and its recorded reason.
	Force  bool   `json:"force,omitempty"`
	Reason string `json:"reason,omitempty"`
	// CatchUpTimeout bounds the candidate's catch-up (switchover, failover).
	CatchUpTimeout *metav1.Duration `json:"catchUpTimeout,omitempty"`
	// By is who asked (the requesting process's actor name).
	By string `json:"by,omitempty"`
	// At is when it was asked.
	At metav1.Time `json:"at"`
	// Deadline is when the requester stops waiting: a request not taken by then is never
	// carried out.
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
	// ID is the request's ID.
	ID string `json:"id"`
	// Type is the request's type.
	Type string `json:"type"`
	// State is Accepted while the supervisor carries it out, then Succeeded or Failed.
	State RequestState `json:"state"`
	// Holder is the supervisor that took it.
	// +optional
	Holder string `json:"holder,omitempty"`
	// Epoch is the transition count of the supervisor Lease its holder took it under: only a
	// supervisor with a newer one takes it over, so a paused one that lost its Lease cannot.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// Message says what happened (the error of a failed request).
	// +optional
	Message string `json:"message,omitempty"`
	// Outcome is the kind of failure, which decides the requesting command's exit code:
	// TimedOut, Unsafe, Held or Error.
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// AcceptedAt is when the supervisor took it; FinishedAt when it ended.
	AcceptedAt metav1.Time `json:"acceptedAt"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// InstanceStatus is one instance as last observed.
type InstanceStatus struct {
	// Name is the pod name.
	Name string `json:"name"`
	// Ordinal is the StatefulSet ordinal.
	Ordinal int32 `json:"ordinal"`
	// PodUID identifies the pod incarnation observed.
	// +optional
	PodUID string `json:"podUID,omitempty"`
	// PodIP is the address the instance had, which replicas use as their source: failure
	// detection asks the replicas about it even when the pod object is gone.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// SemiSyncSource is true when the instance was observed as a semi-synchronous source with a
	// timeout of at least an hour: stopping every replica's receiver then stops it committing.
	// +optional
	SemiSyncSource bool `json:"semiSyncSource,omitempty"`
	// SemiSyncTimeoutSeconds is the semi-sync source timeout the instance was observed with.
	// +optional
	SemiSyncTimeoutSeconds int64 `json:"semiSyncTimeoutSeconds,omitempty"`
	// Role is the instance's role.
	// +optional
	Role Role `json:"role,omitempty"`
	// ServerID is the server_id.
	// +optional
	ServerID int64 `json:"serverID,omitempty"`
	// ServerUUID is the MySQL server_uuid (empty for MariaDB, which has none).
	// +optional
	ServerUUID string `json:"serverUUID,omitempty"`
	// Version is the server version string.
	// +optional
	Version string `json:"version,omitempty"`
	// GTIDExecuted is the executed GTID set (MySQL) or gtid_current_pos (MariaDB).
	// +optional
	GTIDExecuted string `json:"gtidExecuted,omitempty"`
	// LagSeconds is the replication lag; absent means unknown, which is never the same as 0.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty"`
	// IOThread is the replication IO (receiver) thread state: Yes, No or Connecting.
	// +optional
	IOThread string `json:"ioThread,omitempty"`
	// SQLThread is the replication SQL (applier) thread state.
	// +optional
	SQLThread string `json:"sqlThread,omitempty"`
	// LastError is the last IO or SQL thread error.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Classification is the replica classification (Replicating, Lagging, IOBroken, Errant, …).
	// +optional
	Classification string `json:"classification,omitempty"`
	// Restarts is the server container's restart count.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// LastSeen is when the instance last answered.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
}

// GTIDBootstrapRecord is an instance's provenance, recorded before it first joined replication.
type GTIDBootstrapRecord struct {
	// Ordinal is the StatefulSet ordinal.
	Ordinal int32 `json:"ordinal"`
	// PVCUID is the UID of the data volume claim; a different UID later means different data.
	PVCUID string `json:"pvcUID"`
	// ServerUUID is the server identity (MySQL server_uuid; MariaDB server_id).
	// +optional
	ServerUUID string `json:"serverUUID,omitempty"`
	// BootstrapGTIDSet is the GTID set the instance held before joining.
	// +optional
	BootstrapGTIDSet string `json:"bootstrapGTIDSet,omitempty"`
	// RecordedAt is when the record was written.
	RecordedAt metav1.Time `json:"recordedAt"`
}

// HAStatus is the supervisor's persisted view of the primary's health.
type HAStatus struct {
	// State is the HA state.
	State HAState `json:"state"`
	// Evidence lists the observations behind the state.
	// +optional
	Evidence []string `json:"evidence,omitempty"`
	// SuspectedPodUID is the primary pod incarnation under suspicion: suspicion only escalates
	// across checks of the same pod.
	// +optional
	SuspectedPodUID string `json:"suspectedPodUID,omitempty"`
	// FailedChecks counts consecutive failed checks of the primary.
	// +optional
	FailedChecks int32 `json:"failedChecks,omitempty"`
	// LastFailedCheck is when the newest of them ended: a restarted supervisor continues the
	// count only if it is recent.
	// +optional
	LastFailedCheck *metav1.Time `json:"lastFailedCheck,omitempty"`
	// Since is when the state was entered.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// LastFailover is when the last failover finished; the cooldown counts from it.
	// +optional
	LastFailover *metav1.Time `json:"lastFailover,omitempty"`
}

// OperationStatus is the operation in progress, persisted stage by stage.
type OperationStatus struct {
	// ID identifies the operation.
	ID string `json:"id"`
	// Type is bootstrap, switchover, failover, upgrade or scale.
	Type string `json:"type"`
	// Stage is the next stage to run; a resumed operation starts here.
	Stage string `json:"stage"`
	// Holder is the actor (Lease holder identity) running it.
	// +optional
	Holder string `json:"holder,omitempty"`
	// Epoch is the Lease transition count when the holder took it; a stale actor's writes lose.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// StartedAt is when the operation began.
	StartedAt metav1.Time `json:"startedAt"`
	// StartedAtMicro is StartedAt with sub-second precision (startedAt keeps whole seconds),
	// from which durations are measured.
	// +optional
	StartedAtMicro *metav1.MicroTime `json:"startedAtMicro,omitempty"`
	// UpdatedAt is when the stage last changed.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
	// StageStartedAt is when the current stage was entered: every stage has a bound, judged
	// from it.
	// +optional
	StageStartedAt *metav1.Time `json:"stageStartedAt,omitempty"`
	// Target is the requested instance (switchover/failover --to) or image or replica count.
	// +optional
	Target string `json:"target,omitempty"`
	// RequestID is the request (mysqlctl.io/request) that started the operation, if one did:
	// a supervisor that takes the request over continues this operation instead of starting
	// another.
	// +optional
	RequestID string `json:"requestID,omitempty"`
	// Evidence is what justified each decision so far.
	// +optional
	Evidence *OperationEvidence `json:"evidence,omitempty"`
	// Message is a human-readable account of the current stage.
	// +optional
	Message string `json:"message,omitempty"`
}

// OperationEvidence records why an operation did what it did.
type OperationEvidence struct {
	// FencedPrimary is the instance that was fenced.
	// +optional
	FencedPrimary string `json:"fencedPrimary,omitempty"`
	// FenceState is Pending, Verified or Blocked.
	// +optional
	FenceState FenceState `json:"fenceState,omitempty"`
	// FenceMethod says how the fence was applied (super_read_only, read_only+kill, io-threads-stopped, …).
	// +optional
	FenceMethod string `json:"fenceMethod,omitempty"`
	// FencedGTIDSet is the primary's GTID set at fence time: nothing past it was acknowledged.
	// +optional
	FencedGTIDSet string `json:"fencedGTIDSet,omitempty"`
	// SemiSyncProven is true when the old primary was last observed (not configured) as a
	// semi-sync source that waits for an acknowledgement before any commit returns: then a
	// transaction no replica received was never acknowledged to a client.
	// +optional
	SemiSyncProven bool `json:"semiSyncProven,omitempty"`
	// PromotedAt is when the candidate was promoted: from then on nothing is rolled back.
	// +optional
	PromotedAt *metav1.Time `json:"promotedAt,omitempty"`
	// FenceStartedAt is when the fence was applied.
	// +optional
	FenceStartedAt *metav1.Time `json:"fenceStartedAt,omitempty"`
	// FenceDeadline is when a receiver fence stops holding: the old primary's semi-sync timeout,
	// counted from before the failover began, minus a margin. Past it the old primary may commit
	// without acknowledgements, so no promotion happens after it.
	// +optional
	FenceDeadline *metav1.Time `json:"fenceDeadline,omitempty"`
	// Candidate is the chosen instance.
	// +optional
	Candidate string `json:"candidate,omitempty"`
	// CandidateGTIDSet is the candidate's received ∪ executed set at election.
	// +optional
	CandidateGTIDSet string `json:"candidateGTIDSet,omitempty"`
	// CandidateReason says why it was chosen.
	// +optional
	CandidateReason string `json:"candidateReason,omitempty"`
	// Rejected lists other instances and why each was not chosen.
	// +optional
	Rejected []string `json:"rejected,omitempty"`
	// Forced records the reason a person gave for --force, when used.
	// +optional
	Forced string `json:"forced,omitempty"`
	// PrimaryVerdict is what detection concluded about the old primary (Dead, ReadOnly, Unreachable).
	// +optional
	PrimaryVerdict string `json:"primaryVerdict,omitempty"`
	// Detection lists the observations the verdict was drawn from.
	// +optional
	Detection []string `json:"detection,omitempty"`
	// RollbackReason is why the operation is being rolled back (stage RollingBack), and
	// RollbackResult the result it ends with: Failed or Aborted.
	// +optional
	RollbackReason string `json:"rollbackReason,omitempty"`
	// +optional
	RollbackResult string `json:"rollbackResult,omitempty"`
	// TransactionsMissing counts the fenced primary's transactions the candidate had not applied
	// when the catch-up bound ran out (failover of a reachable primary only).
	// +optional
	TransactionsMissing int64 `json:"transactionsMissing,omitempty"`
}

// OperationRecord is a finished operation.
type OperationRecord struct {
	// ID identifies the operation.
	ID string `json:"id"`
	// RequestID is the request that started it, if one did.
	// +optional
	RequestID string `json:"requestID,omitempty"`
	// Type is the operation type.
	Type string `json:"type"`
	// Result is Succeeded, Failed or Aborted.
	Result string `json:"result"`
	// StartedAt is when it began.
	StartedAt metav1.Time `json:"startedAt"`
	// FinishedAt is when it ended.
	FinishedAt metav1.Time `json:"finishedAt"`
	// DurationMilliseconds is how long the operation took, in milliseconds (the timestamps
	// above keep whole seconds only).
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
	// Message explains the result.
	// +optional
	Message string `json:"message,omitempty"`
	// TransactionsLost counts acknowledged transactions lost (must be 0).
	// +optional
	TransactionsLost int64 `json:"transactionsLost,omitempty"`
}

// ErrantInstance is a quarantined instance.
type ErrantInstance struct {
	// Name is the pod name.
	Name string `json:"name"`
	// Reason explains the quarantine.
	Reason string `json:"reason"`
	// ErrantGTIDs are the transactions no known primary produced.
	// +optional
	ErrantGTIDs string `json:"errantGTIDs,omitempty"`
	// Count is the number of errant transactions.
	// +optional
	Count int64 `json:"count,omitempty"`
	// Since is when it was quarantined.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// UpgradeStatus is the persisted state of a rolling upgrade.
type UpgradeStatus struct {
	// Barrier is the last barrier passed.
	Barrier UpgradeBarrier `json:"barrier"`
	// FromImage is the image before the upgrade.
	// +optional
	FromImage string `json:"fromImage,omitempty"`
	// ToImage is the target image.
	// +optional
	ToImage string `json:"toImage,omitempty"`
	// Partition is the StatefulSet partition currently applied.
	// +optional
	Partition *int32 `json:"partition,omitempty"`
}
