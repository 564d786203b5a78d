// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

// Golden ids, computed outside Go with
// printf 'k8s.namespace.name=ml\nk8s.job.name=llama-pretrain\n' | sha256sum | cut -c1-12
const (
	llamaJobID    = "57e2fc99eb03" // k8s ml/llama-pretrain
	mixtralJobID  = "c22ebadddbc7" // k8s ml/mixtral-sft
	otherNSJobID  = "af776f0726ec" // k8s research/llama-pretrain
	testGenerated = "feedc0ffee42"
)

// fakeEnv is a collector's environment as the presets pass it to nemo_run:
// env_run_ids: [${env:NEMO_LENS_RUN_ID:-}, ${env:MEGATRON_OTEL_RUN_ID:-},
// ${env:SLURM_JOB_ID:-}], wandb_entity: ${env:WANDB_ENTITY:-} and
// wandb_project: ${env:WANDB_PROJECT:-}.
type fakeEnv map[string]string

func (e fakeEnv) apply(c *Config) {
	if e == nil {
		return
	}
	c.EnvRunIDs = []string{e["NEMO_LENS_RUN_ID"], e["MEGATRON_OTEL_RUN_ID"], e["SLURM_JOB_ID"]}
	c.WandbEntity, c.WandbProject = e["WANDB_ENTITY"], e["WANDB_PROJECT"]
}

// newTestProcessor builds a traces processor from the default config with
// env applied, then configure; its single-node state, if any, runs on a
// fake clock (p.clock).
func newTestProcessor(tb testing.TB, configure func(*Config), env fakeEnv) *runProcessor {
	tb.Helper()
	cfg := createDefaultConfig().(*Config)
	env.apply(cfg)
	if configure != nil {
		configure(cfg)
	}
	require.NoError(tb, cfg.Validate())
	p, err := newRunProcessor(processortest.NewNopSettings(metadata.Type), cfg, "traces", testGenerated, withClock(clocktest.NewFake()))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, p.shutdown(context.Background())) }) //nolint:usetesting // tb.Context() is canceled before Cleanup runs
	return p
}

func resourceAttrs(tb testing.TB, raw map[string]any) pcommon.Map {
	tb.Helper()
	m := pcommon.NewMap()
	require.NoError(tb, m.FromRaw(raw))
	return m
}

func k8sJob(namespace, job string, extra map[string]any) map[string]any {
	m := map[string]any{
		"service.name":       "nemo",
		"k8s.namespace.name": namespace,
		"k8s.job.name":       job,
		"k8s.pod.name":       job + "-x7k2p",
	}
	maps.Copy(m, extra)
	return m
}

func TestAssignRunIDPrecedence(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*Config)
		env       fakeEnv
		in        map[string]any
		// wantID is the nemo.run.id after processing; wantSource and
		// wantOriginal are the attributes written ("" means absent).
		wantID       string
		wantSource   string
		wantOriginal string
		wantOutcome  outcome
	}{
		{
			name:        "sender id kept without job keys",
			in:          map[string]any{"nemo.run.id": "a1b2c3d4e5f6", "dl.rank": int64(3)},
			wantID:      "a1b2c3d4e5f6",
			wantOutcome: outcomeKept,
		},
		{
			name:        "explicit job-wide id kept despite job keys",
			in:          k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "llama3-70b-run7"}),
			wantID:      "llama3-70b-run7",
			wantOutcome: outcomeKept,
		},
		{
			name:         "per-process id reconciled to the kubernetes job id",
			in:           k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "a1b2c3d4e5f6"}),
			wantID:       llamaJobID,
			wantSource:   "job_keys",
			wantOriginal: "a1b2c3d4e5f6",
			wantOutcome:  outcomeReconciled,
		},
		{
			name:         "per-process id reconciled to the slurm job id",
			in:           map[string]any{"nemo.run.id": "0f0e0d0c0b0a", "slurm.job.id": "4242"},
			wantID:       "4242",
			wantSource:   "job_keys",
			wantOriginal: "0f0e0d0c0b0a",
			wantOutcome:  outcomeReconciled,
		},
		{
			name:        "id equal to an int job key value is job-wide (NeMo Lens fell back to SLURM_JOB_ID)",
			in:          map[string]any{"nemo.run.id": "123456789012", "slurm.job.id": int64(123456789012)},
			wantID:      "123456789012",
			wantOutcome: outcomeKept,
		},
		{
			name:        "id equal to one value of a multi-key set is job-wide",
			in:          k8sJob("ml", "abcdef012345", map[string]any{"nemo.run.id": "abcdef012345"}),
			wantID:      "abcdef012345",
			wantOutcome: outcomeKept,
		},
		{
			name: "id already reconciled by a first tier is kept with its source and original",
			in: k8sJob("ml", "llama-pretrain", map[string]any{
				"nemo.run.id": llamaJobID, "nemo.run_id_source": "job_keys", "nemo.original_run_id": "a1b2c3d4e5f6",
			}),
			wantID:       llamaJobID,
			wantSource:   "job_keys",
			wantOriginal: "a1b2c3d4e5f6",
			wantOutcome:  outcomeKept,
		},
		{
			name: "an original saved upstream is not overwritten",
			in: k8sJob("ml", "llama-pretrain", map[string]any{
				"nemo.run.id": "a1b2c3d4e5f6", "nemo.original_run_id": "first-sender-id",
			}),
			wantID:       llamaJobID,
			wantSource:   "job_keys",
			wantOriginal: "first-sender-id",
			wantOutcome:  outcomeReconciled,
		},
		{
			name:        "missing id derived from the kubernetes job",
			in:          k8sJob("ml", "llama-pretrain", nil),
			env:         fakeEnv{"NEMO_LENS_RUN_ID": "from-env"},
			wantID:      llamaJobID,
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "namespace is part of the derived id",
			in:          k8sJob("research", "llama-pretrain", nil),
			wantID:      otherNSJobID,
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "missing id from nv.dl.job.uuid verbatim",
			in:          map[string]any{"nv.dl.job.uuid": "5b0f6a0e-3c1d-4b9e-9d7a-2f1e0c9b8a76", "nv.dl.run.uuid": "x"},
			wantID:      "5b0f6a0e-3c1d-4b9e-9d7a-2f1e0c9b8a76",
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "first complete set wins",
			in:          k8sJob("ml", "llama-pretrain", map[string]any{"slurm.job.id": int64(777), "nv.dl.job.uuid": "u-1"}),
			wantID:      "777",
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "int and string job values with spaces agree",
			in:          map[string]any{"slurm.job.id": " 777 "},
			wantID:      "777",
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "blank and garbage job values make a set incomplete",
			in:          k8sJob("ml", "llama-pretrain", map[string]any{"slurm.job.id": "  ", "nv.dl.job.uuid": true}),
			wantID:      llamaJobID,
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
		{
			name:        "incomplete set falls through to the collector environment",
			in:          map[string]any{"k8s.job.name": "llama-pretrain"},
			env:         fakeEnv{"NEMO_LENS_RUN_ID": "exp-1", "MEGATRON_OTEL_RUN_ID": "m-1", "SLURM_JOB_ID": "99"},
			wantID:      "exp-1",
			wantSource:  "env",
			wantOutcome: outcomeEnv,
		},
		{
			name:        "MEGATRON_OTEL_RUN_ID before SLURM_JOB_ID",
			in:          map[string]any{},
			env:         fakeEnv{"MEGATRON_OTEL_RUN_ID": "m-1", "SLURM_JOB_ID": "99"},
			wantID:      "m-1",
			wantSource:  "env",
			wantOutcome: outcomeEnv,
		},
		{
			name:        "blank environment variable skipped",
			in:          map[string]any{},
			env:         fakeEnv{"NEMO_LENS_RUN_ID": "  ", "SLURM_JOB_ID": "99"},
			wantID:      "99",
			wantSource:  "env",
			wantOutcome: outcomeEnv,
		},
		{
			name:        "environment beats static",
			configure:   func(c *Config) { c.RunID = "static-run" },
			in:          map[string]any{},
			env:         fakeEnv{"SLURM_JOB_ID": "99"},
			wantID:      "99",
			wantSource:  "env",
			wantOutcome: outcomeEnv,
		},
		{
			name:        "static when the environment has none",
			configure:   func(c *Config) { c.RunID = "static-run" },
			in:          map[string]any{},
			wantID:      "static-run",
			wantSource:  "static",
			wantOutcome: outcomeStatic,
		},
		{
			name:        "env_run_ids without SLURM_JOB_ID ignores the collector's own SLURM job",
			configure:   func(c *Config) { c.EnvRunIDs = []string{}; c.RunID = "static-run" },
			in:          map[string]any{},
			env:         fakeEnv{"SLURM_JOB_ID": "99"},
			wantID:      "static-run",
			wantSource:  "static",
			wantOutcome: outcomeStatic,
		},
		{
			name:        "generated id last",
			in:          map[string]any{"service.name": "nemo"},
			wantID:      testGenerated,
			wantSource:  "generated",
			wantOutcome: outcomeGenerated,
		},
		{
			name:        "blank sender id is missing and not saved",
			in:          map[string]any{"nemo.run.id": " "},
			wantID:      testGenerated,
			wantSource:  "generated",
			wantOutcome: outcomeGenerated,
		},
		{
			name:         "garbage sender id type replaced and saved",
			in:           map[string]any{"nemo.run.id": true},
			env:          fakeEnv{"NEMO_LENS_RUN_ID": "exp-1"},
			wantID:       "exp-1",
			wantSource:   "env",
			wantOriginal: "true",
			wantOutcome:  outcomeEnv,
		},
		{
			name:        "int sender id kept as its decimal string",
			in:          map[string]any{"nemo.run.id": int64(4242)},
			wantID:      "4242",
			wantOutcome: outcomeKept,
		},
		{
			name:         "override replaces a sender id even with job keys",
			configure:    func(c *Config) { c.Override = true },
			in:           k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "a1b2c3d4e5f6"}),
			env:          fakeEnv{"NEMO_LENS_RUN_ID": "job-7"},
			wantID:       "job-7",
			wantSource:   "env",
			wantOriginal: "a1b2c3d4e5f6",
			wantOutcome:  outcomeOverridden,
		},
		{
			name:         "override replaces an explicit sender id",
			configure:    func(c *Config) { c.Override = true; c.RunID = "job-7" },
			in:           map[string]any{"nemo.run.id": "llama3-70b-run7"},
			wantID:       "job-7",
			wantSource:   "static",
			wantOriginal: "llama3-70b-run7",
			wantOutcome:  outcomeOverridden,
		},
		{
			name:        "override keeps an equal id",
			configure:   func(c *Config) { c.Override = true },
			in:          map[string]any{"nemo.run.id": "job-7"},
			env:         fakeEnv{"NEMO_LENS_RUN_ID": "job-7"},
			wantID:      "job-7",
			wantOutcome: outcomeKept,
		},
		{
			name:        "override fills a missing id with the collector's id, not job keys",
			configure:   func(c *Config) { c.Override = true; c.EnvRunIDs = nil; c.RunID = "job-7" },
			in:          k8sJob("ml", "llama-pretrain", nil),
			env:         fakeEnv{"NEMO_LENS_RUN_ID": "ignored"},
			wantID:      "job-7",
			wantSource:  "static",
			wantOutcome: outcomeStatic,
		},
		{
			name:        "empty per_process_id_pattern trusts every sender id",
			configure:   func(c *Config) { c.PerProcessIDPattern = "" },
			in:          k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "a1b2c3d4e5f6"}),
			wantID:      "a1b2c3d4e5f6",
			wantOutcome: outcomeKept,
		},
		{
			name:         "a catch-all per_process_id_pattern reconciles every sender id",
			configure:    func(c *Config) { c.PerProcessIDPattern = ".+" },
			in:           k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "llama3-70b-run7"}),
			wantID:       llamaJobID,
			wantSource:   "job_keys",
			wantOriginal: "llama3-70b-run7",
			wantOutcome:  outcomeReconciled,
		},
		{
			name:        "custom job keys",
			configure:   func(c *Config) { c.JobKeys = [][]string{{"rl.worker_group", "host.name"}} },
			in:          map[string]any{"rl.worker_group": "policy", "host.name": "node-1"},
			wantID:      "5913afde4889",
			wantSource:  "job_keys",
			wantOutcome: outcomeDerived,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProcessor(t, tt.configure, tt.env)
			attrs := resourceAttrs(t, tt.in)

			got := p.assignRunID(attrs, &tally{})

			assert.Equal(t, outcomeNames[tt.wantOutcome], outcomeNames[got])
			want := maps.Clone(tt.in)
			want[attrkey.RunID] = tt.wantID
			if tt.wantSource != "" {
				want[attrkey.RunIDSource] = tt.wantSource
			}
			if tt.wantOriginal != "" {
				want[attrkey.OriginalRunID] = tt.wantOriginal
			}
			assert.Equal(t, want, attrs.AsRaw(), "only the run id attributes change")
			v, _ := attrs.Get(attrkey.RunID)
			assert.Equal(t, pcommon.ValueTypeStr, v.Type())
		})
	}
}

// derivedRunID is the id a resource with attrs gets from the job key set keys.
func derivedRunID(tb testing.TB, attrs pcommon.Map, keys []string) string {
	tb.Helper()
	var j job
	require.True(tb, j.read(attrs, keys), "all of %v present", keys)
	return string(j.appendRunID(nil))
}

func TestDerivedRunIDFormula(t *testing.T) {
	attrs := resourceAttrs(t, map[string]any{"k8s.namespace.name": "ml", "k8s.job.name": "llama-pretrain", "slurm.job.id": int64(42)})
	assert.Equal(t, llamaJobID, derivedRunID(t, attrs, []string{"k8s.namespace.name", "k8s.job.name"}))
	assert.NotEqual(t, llamaJobID, derivedRunID(t, attrs, []string{"k8s.job.name", "k8s.namespace.name"}),
		"key order is part of the formula")
	assert.Equal(t, "42", derivedRunID(t, attrs, []string{"slurm.job.id"}))
	assert.Regexp(t, `^[0-9a-f]{12}$`, derivedRunID(t, attrs, []string{"slurm.job.id", "k8s.job.name"}))
}

func TestGenerateRunID(t *testing.T) {
	a, b := generateRunID(), generateRunID()
	assert.Regexp(t, `^[0-9a-f]{12}$`, a)
	assert.Regexp(t, `^[0-9a-f]{12}$`, b)
	assert.NotEqual(t, a, b)
}

// rankResource is one rank of a torchrun job on Kubernetes as NeMo Lens sends
// it without NEMO_LENS_RUN_ID: every process minted its own id. The ranks
// mix the rank spellings as a real fleet does.
func rankResource(job string, rank int, ownID bool) map[string]any {
	r := lensfixture.Fleet(lensfixture.Rank{WorldSize: 8})[rank]
	if ownID {
		r.Run = fmt.Sprintf("%012x", 0xa1b2c3000000+rank*7919)
	}
	m := pcommon.NewMap()
	r.PutResource(m)
	return k8sJob("ml", job, m.AsRaw())
}

// Two collectors of a scaled-out tier see the ranks of the same jobs in
// different orders, batched differently and on different signals: they must
// agree on one id per job, without sharing state.
func TestDerivedRunIDIsDeterministicAcrossCollectors(t *testing.T) {
	collectorA := newTestProcessor(t, nil, fakeEnv{"SLURM_JOB_ID": "1"})
	cfgB := createDefaultConfig().(*Config)
	fakeEnv{"NEMO_LENS_RUN_ID": "other"}.apply(cfgB)
	collectorB, err := newRunProcessor(processortest.NewNopSettings(metadata.Type), cfgB, "metrics", "0123456789ab")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, collectorB.shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs

	type rank struct {
		job   string
		rank  int
		ownID bool
	}
	var ranks []rank
	for _, job := range []string{"llama-pretrain", "mixtral-sft"} {
		for r := range 8 {
			ranks = append(ranks, rank{job, r, r != 5}) // rank 5 sends no id at all
		}
	}
	idsOf := func(p *runProcessor, order []rank, batch int) map[string]map[string]bool {
		seen := map[string]map[string]bool{}
		for start := 0; start < len(order); start += batch {
			td := ptrace.NewTraces()
			for _, r := range order[start:min(start+batch, len(order))] {
				require.NoError(t, td.ResourceSpans().AppendEmpty().Resource().Attributes().FromRaw(rankResource(r.job, r.rank, r.ownID)))
			}
			md := pmetric.NewMetrics()
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				td.ResourceSpans().At(i).Resource().CopyTo(md.ResourceMetrics().AppendEmpty().Resource())
			}
			var resources []pcommon.Map
			if p == collectorA {
				_, err := p.processTraces(t.Context(), td)
				require.NoError(t, err)
				for i := 0; i < td.ResourceSpans().Len(); i++ {
					resources = append(resources, td.ResourceSpans().At(i).Resource().Attributes())
				}
			} else {
				_, err := p.processMetrics(t.Context(), md)
				require.NoError(t, err)
				for i := 0; i < md.ResourceMetrics().Len(); i++ {
					resources = append(resources, md.ResourceMetrics().At(i).Resource().Attributes())
				}
			}
			for _, attrs := range resources {
				job, _ := attrs.Get("k8s.job.name")
				id, _ := attrs.Get(attrkey.RunID)
				if seen[job.Str()] == nil {
					seen[job.Str()] = map[string]bool{}
				}
				seen[job.Str()][id.Str()] = true
			}
		}
		return seen
	}

	reversed := make([]rank, len(ranks))
	for i, r := range ranks {
		reversed[len(ranks)-1-i] = r
	}
	shuffled := append([]rank(nil), ranks...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	want := map[string]map[string]bool{
		"llama-pretrain": {llamaJobID: true},
		"mixtral-sft":    {mixtralJobID: true},
	}
	assert.Equal(t, want, idsOf(collectorA, ranks, 3))
	assert.Equal(t, want, idsOf(collectorB, reversed, 5))
	assert.Equal(t, want, idsOf(collectorB, shuffled, 1))
}
