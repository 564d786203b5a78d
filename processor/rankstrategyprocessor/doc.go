// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package rankstrategyprocessor keeps the telemetry of the training ranks a
// NeMo Lens export strategy selects (single_rank, all_ranks, sampled,
// first_rank_per_node, or an explicit list of ranks) and drops the rest,
// evaluated per run and worker group in the collector, where the whole fleet
// is visible. Errors, truncated spans and high-severity logs from dropped
// ranks are kept and marked with the reason. With the stragglers block, the
// step subtrees of dropped ranks are held until every rank has reported the
// step, and a rank's step is kept when its busy time (the step minus the
// time spent waiting for the other ranks) was markedly longer than the
// fastest rank's, or than its own recent steps'.
package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"
