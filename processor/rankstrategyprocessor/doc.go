//go:generate ../../.tools/mdatagen metadata.yaml

// Package rankstrategyprocessor keeps the telemetry of the training ranks a
// NeMo Lens export strategy selects (single_rank, all_ranks, sampled,
// first_rank_per_node, or an explicit list of ranks) and drops the rest,
// evaluated per run and worker group in the collector, where the whole fleet
// is visible. Errors, truncated spans and high-severity logs from dropped
// ranks are kept and marked with the reason. With the stragglers block, the
// step subtrees of dropped ranks are held for a while and a rank's step is
// kept when it was markedly slower than the other ranks on that step.
package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"
