// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// gatewayBatch is what a gateway gets from an agent (summarize): rank 7's
// spans (the export rank), rank 2's step kept by its agent as a straggler,
// and summaries of rank 3.
func gatewayBatch() ptrace.Traces {
	run := lensfixture.Run{Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-gw", WorldSize: 8})}
	td := ptrace.NewTraces()
	for _, rank := range []int64{7, 2} {
		spans := lensfixture.AppendResource(td, run.Ranks[rank])
		run.AppendStep(spans, run.Ranks[rank], 1)
		if rank == 2 {
			for _, s := range spans.All() {
				s.Attributes().PutStr(attrkey.KeptReason, attrkey.KeptStraggler)
			}
		}
	}
	src := ptrace.NewTraces()
	from := lensfixture.AppendResource(src, run.Ranks[3])
	stepAt := run.AppendStep(from, run.Ranks[3], 1)
	rs := td.ResourceSpans().AppendEmpty()
	src.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
	summaries := stepsummary.NewScope(rs)
	stepsummary.WriteStep(summaries.AppendEmpty(), from.At(stepAt), 1, 15_000_000, 0)
	stepsummary.WritePhase(summaries.AppendEmpty(), from.At(0))
	return td
}

// A gateway never passes an agent's summaries on, with or without straggler
// retention and whatever its strategy, and keeps what an agent kept as a
// straggler although its own strategy drops that rank.
func TestGatewayTakesSummariesAndKeepsTheAgentsStragglers(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"single_rank, stragglers": nil,
		"single_rank, no stragglers": func(c *Config) {
			c.Stragglers = configoptional.None[StragglersConfig]()
		},
		"all_ranks": func(c *Config) { c.Strategy = StrategyAllRanks },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, edit)
			require.NoError(t, h.traces.ConsumeTraces(t.Context(), gatewayBatch()))
			perRank := map[int64]int{}
			for _, td := range h.tsink.AllTraces() {
				for _, rs := range td.ResourceSpans().All() {
					assert.False(t, stepsummary.Has(rs), "a summary was passed on")
					n, _, _ := rankattr.Lookup(rs.Resource().Attributes(), []string{attrkey.DLRank, attrkey.LegacyDLRank})
					perRank[n] += rs.ScopeSpans().At(0).Spans().Len()
				}
			}
			steps := lensfixture.DefaultStep.Spans()
			assert.Equal(t, steps, perRank[7], "the export rank")
			assert.Equal(t, steps, perRank[2], "the step its agent kept")
			assert.Zero(t, perRank[3], "a summarized rank has no spans")
		})
	}
}
