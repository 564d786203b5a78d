// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package attrkey names the attributes (and the step span names) that more
// than one place of this distribution reads or writes, so that each name is
// spelled once. Standard names come from the OpenTelemetry semantic
// conventions; the others are those NeMo Lens, Megatron-LM and NeMo-RL send,
// or those our components add.
package attrkey // import "github.com/nemo-lens/otelcol-nemo/internal/attrkey"

import semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

// Standard resource attributes.
const (
	// HostName is the host a process runs on; the ranks of a single-node
	// launch share it.
	HostName = string(semconv.HostNameKey)
	// ServiceName is the service a process reports as.
	ServiceName = string(semconv.ServiceNameKey)
	// K8sNamespaceName is the Kubernetes namespace of a job's pods.
	K8sNamespaceName = string(semconv.K8SNamespaceNameKey)
	// K8sJobName is the Kubernetes job a pod belongs to.
	K8sJobName = string(semconv.K8SJobNameKey)
)

// Run identity.
const (
	// RunID is the run a resource belongs to: one training job.
	RunID = "nemo.run.id"
	// OriginalRunID keeps the sender's run id when nemo_run replaced it.
	OriginalRunID = "nemo.original_run_id"
	// RunIDSource says where nemo_run took the run id from (sender, job
	// keys, env, ...); its presence marks a resource an upstream nemo_run
	// already handled.
	RunIDSource = "nemo.run_id_source"
	// WorkerGroup is the NeMo-RL worker group within which ranks are numbered.
	WorkerGroup = "rl.worker_group"
	// SlurmJobID is the SLURM job id, a job-wide key.
	SlurmJobID = "slurm.job.id"
	// DLJobUUID is the NeMo Lens job UUID, a job-wide key.
	DLJobUUID = "nv.dl.job.uuid"
	// WandbEntity is the W&B entity a run's data is routed to.
	WandbEntity = "wandb.entity"
	// WandbProject is the W&B project a run's data is routed to.
	WandbProject = "wandb.project"
)

// Rank identity, as NeMo Lens sends it: the nv.dl.* spelling is the newer,
// dl.* the older (see internal/rankattr for reading them).
const (
	// DLRank is the process's global rank.
	DLRank = "nv.dl.rank"
	// LegacyDLRank is DLRank in the older spelling.
	LegacyDLRank = "dl.rank"
	// DLWorldSize is the number of ranks of the job.
	DLWorldSize = "nv.dl.world_size"
	// LegacyDLWorldSize is DLWorldSize in the older spelling.
	LegacyDLWorldSize = "dl.world_size"
	// DLLocalRank is the process's rank within its node.
	DLLocalRank = "nv.dl.local_rank"
	// LegacyDLLocalRank is DLLocalRank in the older spelling.
	LegacyDLLocalRank = "dl.local_rank"
)

// Pipeline parallelism, as NeMo Lens and Megatron-LM send it: the size on
// the resource (both spellings), a rank's stage on its spans.
const (
	// PipelineSize is the number of pipeline stages.
	PipelineSize = "nv.dl.topology.size.pp"
	// LegacyPipelineSize is PipelineSize in the older spelling.
	LegacyPipelineSize = "dl.pipeline_parallel.size"
	// PipelineRank is a span attribute: the rank's pipeline stage.
	PipelineRank = "dl.pipeline_parallel.rank"
)

// Rank identity as nemo_run writes it with canonical_ranks: typed int copies
// of the attributes above.
const (
	// Rank is the typed copy of the global rank.
	Rank = "nemo.rank"
	// WorldSize is the typed copy of the world size.
	WorldSize = "nemo.world_size"
	// LocalRank is the typed copy of the local rank.
	LocalRank = "nemo.local_rank"
)

// Span attributes that rank_strategy and step_sampling add or read. The
// added ones sit under their own nemo.rank_strategy namespace so that no key
// we know of (nemo.run.id, nemo.span.truncated, ...) is a dotted prefix or
// extension of them, which Weave would reject.
const (
	// KeptReason says why a span or log record of a rank that is otherwise
	// dropped was kept (error, truncated, severity, straggler). step_sampling
	// marks the spans it keeps with it too, so that one attribute tells every
	// reason, whichever processor kept it.
	KeptReason = "nemo.rank_strategy.kept_reason"
	// RelativeScore is a kept straggler step's fastest busy time over this
	// rank's.
	RelativeScore = "nemo.rank_strategy.relative_score"
	// IndividualScore is the rank's recent best busy time over this step's.
	IndividualScore = "nemo.rank_strategy.individual_score"
	// SpanTruncated is set to true by NeMo Lens on spans force-closed at
	// shutdown.
	SpanTruncated = "nemo.span.truncated"
)

// The values of KeptReason. rank_strategy writes the first four; a span of
// a step it kept as a straggler tells step_sampling to keep the step too.
const (
	// KeptError: the span's status is ERROR.
	KeptError = "error"
	// KeptTruncated: the span was force-closed at shutdown (SpanTruncated).
	KeptTruncated = "truncated"
	// KeptSeverity: a log record at or above keep_log_severity.
	KeptSeverity = "severity"
	// KeptStraggler: the span's step was kept because its rank straggled.
	KeptStraggler = "straggler"
	// KeptSampledStep: step_sampling sampled the span's step.
	KeptSampledStep = "sampled_step"
)

// Megatron-LM steps.
const (
	// MegatronIteration is the step span attribute holding the iteration.
	MegatronIteration = "megatron.iteration"
	// MegatronNumMicrobatches is the step span attribute holding the
	// number of micro-batches of the step.
	MegatronNumMicrobatches = "megatron.num_microbatches"
	// MegatronTrainStep is the name of Megatron-LM's step span.
	MegatronTrainStep = "megatron.train_step"
	// MegatronTrainIteration is the name of the step span in Megatron-LM's
	// newer span taxonomy.
	MegatronTrainIteration = "megatron.train.iteration"
)
