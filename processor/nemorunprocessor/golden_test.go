// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// goldenFleet is the input of the golden cases, one batch holding one step
// span of each of these ranks, their rank attributes in both spellings,
// half of them strings:
//   - ranks 0 and 1 of a job launched with NEMO_LENS_RUN_ID: the explicit
//     id llama-70b-pretrain, kept;
//   - ranks 0 and 1 of SLURM job 4242 without a shared id: each its own
//     12-hex per-process id, reconciled to the id derived from the job;
//   - rank 0 of SLURM job 4343 sending no run id: derived from the job.
func goldenFleet() ptrace.Traces {
	slurm := func(job string) []lensfixture.KeyValue {
		return []lensfixture.KeyValue{{Key: attrkey.SlurmJobID, Value: job}}
	}
	ranks := []lensfixture.Rank{
		{Run: "llama-70b-pretrain", Rank: 0, WorldSize: 2},
		{Run: "llama-70b-pretrain", Rank: 1, WorldSize: 2, AsString: true, LegacyKeys: true},
		{Run: "a1b2c3d4e5f6", Rank: 0, WorldSize: 2, Extra: slurm("4242")},
		{Run: "0f9e8d7c6b5a", Rank: 1, WorldSize: 2, AsString: true, LegacyKeys: true, Extra: slurm("4242")},
		{Rank: 0, WorldSize: 1, Extra: slurm("4343")},
	}
	run := lensfixture.Run{Ranks: ranks}
	td := ptrace.NewTraces()
	for _, r := range ranks {
		run.AppendStepPart(lensfixture.AppendResource(td, r), r, 1, lensfixture.StepSpan)
	}
	return td
}

func TestGoldenTraces(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		// The defaults: run ids as the README's table says (the explicit
		// id kept; the SLURM jobs' ids derived from slurm.job.id, the
		// per-process ids kept in nemo.original_run_id), with
		// nemo.run_id_source where the id was chosen here.
		{name: "run_ids", edit: func(*Config) {}},
		// As run_ids, with typed copies of the rank identity (nemo.rank,
		// nemo.world_size, nemo.local_rank as ints) whatever spelling and
		// type the rank sent.
		{name: "canonical_ranks", edit: func(cfg *Config) { cfg.CanonicalRanks = true }},
		// As run_ids, with the W&B identity the Weave preset passes in:
		// wandb.entity and wandb.project on every resource.
		{name: "wandb_identity", edit: func(cfg *Config) { cfg.WandbEntity, cfg.WandbProject = "nvidia-research", "llama" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tt.name)
			goldentest.WriteInput(t, dir, goldenFleet)
			cfg := createDefaultConfig().(*Config)
			tt.edit(cfg)
			require.NoError(t, cfg.Validate())
			goldentest.Traces(t, NewFactory(), cfg, dir)
		})
	}
}
