// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadatatest"
)

func TestRanks(t *testing.T) {
	tests := []struct {
		name        string
		in          map[string]any
		wantInvalid [numRankFields]int64
		// wantCanonical: nemo.rank, nemo.world_size, nemo.local_rank written
		// with canonical_ranks on (absent keys are not written).
		wantCanonical map[string]any
	}{
		{
			name:          "int ranks, newer spelling",
			in:            map[string]any{"nv.dl.rank": int64(3), "nv.dl.world_size": int64(8), "nv.dl.local_rank": int64(3)},
			wantCanonical: map[string]any{"nemo.rank": int64(3), "nemo.world_size": int64(8), "nemo.local_rank": int64(3)},
		},
		{
			name:          "string ranks from OTEL_RESOURCE_ATTRIBUTES, older spelling",
			in:            map[string]any{"dl.rank": "12", "dl.world_size": " 16 ", "dl.local_rank": "4"},
			wantCanonical: map[string]any{"nemo.rank": int64(12), "nemo.world_size": int64(16), "nemo.local_rank": int64(4)},
		},
		{
			name:          "newer spelling wins",
			in:            map[string]any{"nv.dl.rank": "2", "dl.rank": int64(1)},
			wantCanonical: map[string]any{"nemo.rank": int64(2)},
		},
		{
			name:          "missing ranks",
			in:            map[string]any{"service.name": "nemo"},
			wantCanonical: map[string]any{},
		},
		{
			name:          "garbage rank left alone and counted",
			in:            map[string]any{"dl.rank": "three", "dl.world_size": int64(8)},
			wantInvalid:   [numRankFields]int64{fieldRank: 1},
			wantCanonical: map[string]any{"nemo.world_size": int64(8)},
		},
		{
			name:          "negative, double and bool values",
			in:            map[string]any{"nv.dl.rank": int64(-1), "nv.dl.world_size": 8.0, "nv.dl.local_rank": true},
			wantInvalid:   [numRankFields]int64{1, 1, 1},
			wantCanonical: map[string]any{},
		},
		{
			name:          "an existing canonical copy is refreshed",
			in:            map[string]any{"dl.rank": "5", "nemo.rank": int64(4)},
			wantCanonical: map[string]any{"nemo.rank": int64(5)},
		},
	}
	for _, tt := range tests {
		for _, canonical := range []bool{false, true} {
			name := tt.name
			if canonical {
				name += "/canonical_ranks"
			}
			t.Run(name, func(t *testing.T) {
				p := newTestProcessor(t, func(c *Config) { c.CanonicalRanks = canonical; c.RunID = "r" }, nil)
				attrs := resourceAttrs(t, tt.in)
				var tl tally
				p.checkRanks(attrs, &tl)

				assert.Equal(t, tt.wantInvalid, tl.invalid)
				want := make(map[string]any, len(tt.in))
				maps.Copy(want, tt.in)
				if canonical {
					maps.Copy(want, tt.wantCanonical)
				}
				assert.Equal(t, want, attrs.AsRaw(), "sender's rank attributes are never rewritten")
			})
		}
	}
}

func TestWandbIdentity(t *testing.T) {
	tests := []struct {
		name                 string
		entity, project      string
		env                  fakeEnv
		in                   map[string]any
		wantEntity, wantProj any
	}{
		{name: "inserted from config", entity: "nv", project: "llama", in: map[string]any{}, wantEntity: "nv", wantProj: "llama"},
		{
			name: "inserted from the collector environment as the presets pass it", env: fakeEnv{"WANDB_ENTITY": " env-ent ", "WANDB_PROJECT": "env-proj"},
			in: map[string]any{}, wantEntity: "env-ent", wantProj: "env-proj",
		},
		{
			name: "sender's values never overwritten", entity: "nv", project: "llama",
			in:         map[string]any{"wandb.entity": "team", "wandb.project": "mine"},
			wantEntity: "team", wantProj: "mine",
		},
		{
			name: "each inserted independently", entity: "nv", project: "llama",
			in: map[string]any{"wandb.project": "mine"}, wantEntity: "nv", wantProj: "mine",
		},
		{
			name: "empty string counts as missing", entity: "nv", project: "llama",
			in: map[string]any{"wandb.entity": ""}, wantEntity: "nv", wantProj: "llama",
		},
		{
			name: "a non-string value is not overwritten", entity: "nv", project: "llama",
			in: map[string]any{"wandb.entity": int64(7)}, wantEntity: int64(7), wantProj: "llama",
		},
		{name: "nothing configured: nothing inserted", in: map[string]any{}, wantEntity: nil, wantProj: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProcessor(t, func(c *Config) {
				if tt.env == nil {
					c.WandbEntity, c.WandbProject = tt.entity, tt.project
				}
			}, tt.env)
			attrs := resourceAttrs(t, tt.in)
			var tl tally
			p.processResource(attrs, &tl)
			raw := attrs.AsRaw()
			assert.Equal(t, tt.wantEntity, raw["wandb.entity"])
			assert.Equal(t, tt.wantProj, raw["wandb.project"])
		})
	}
}

// knownSenderKeys are the resource attributes NeMo Lens, Megatron-LM and
// NeMo-RL ranks send (bench/README.md, "What a rank sends") plus the span attributes Weave reads.
var knownSenderKeys = []string{
	"service.name", "service.instance.id", "nemo.run.id", "nemo.user.id", "nemo.span.truncated",
	"wandb.entity", "wandb.project", "wandb.wb_run_id", "wandb.wb_run_step", "wandb.display_name",
	"wandb.thread_id", "wandb.attributes", "deployment.environment",
	"dl.rank", "dl.world_size", "dl.local_rank", "nv.dl.rank", "nv.dl.world_size", "nv.dl.local_rank",
	"dl.tensor_parallel.size", "dl.pipeline_parallel.size", "dl.data_parallel.size", "dl.pipeline_parallel.rank",
	"nv.dl.topology.size.tp", "nv.dl.topology.size.pp", "nv.dl.topology.size.dp",
	"nv.dl.job.uuid", "nv.dl.run.uuid",
	"slurm.job.id", "slurm.job.id.raw", "slurm.job.name", "slurm.nodelist", "slurm.nnodes", "slurm.ntasks",
	"slurm.partition", "slurm.cluster.name",
	"k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.node.name", "k8s.container.name", "k8s.job.name",
	"host.name", "process.pid", "host.gpu.count", "rl.worker_group",
}

// collides reports whether a and b cannot coexist under Weave's rule: one is
// a dotted prefix of the other.
func collides(a, b string) bool {
	return strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

func TestWrittenKeysAreWeaveSafe(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	known := slices.Concat(knownSenderKeys, slices.Concat(cfg.JobKeys...))
	for _, w := range writtenKeys {
		for _, k := range slices.Concat(known, writtenKeys) {
			assert.False(t, collides(w, k), "written key %q and %q: Weave rejects a span carrying both", w, k)
		}
	}

	// And on real output: a resource that goes through every write path.
	p := newTestProcessor(t, func(c *Config) { c.CanonicalRanks = true; c.WandbEntity = "nv"; c.WandbProject = "llama" }, nil)
	in := map[string]any{}
	for _, k := range knownSenderKeys {
		if !strings.HasPrefix(k, "wandb.") && k != "slurm.job.id.raw" && !strings.HasPrefix(k, "slurm.") {
			in[k] = "1"
		}
	}
	in["nemo.run.id"] = "a1b2c3d4e5f6"
	in["nv.dl.job.uuid"] = "5b0f6a0e"
	attrs := resourceAttrs(t, in)
	var tl tally
	p.processResource(attrs, &tl)
	require.Equal(t, int64(1), tl.ids[outcomeReconciled])
	var out []string
	for k := range attrs.All() {
		out = append(out, k)
	}
	for _, w := range writtenKeys {
		assert.Contains(t, out, w, "every written key is exercised")
		for _, k := range out {
			assert.False(t, collides(w, k), "output carries %q and %q", w, k)
		}
	}
}

func TestKeptRunIDDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*Config)
		env       fakeEnv
		in        map[string]any
	}{
		{name: "no job keys", in: map[string]any{"nemo.run.id": "a1b2c3d4e5f6", "nv.dl.rank": int64(3), "nv.dl.world_size": int64(8)}},
		{
			name:      "explicit id with kubernetes job keys and string ranks",
			configure: func(c *Config) { c.WandbEntity = "nv"; c.WandbProject = "llama" },
			in: k8sJob("a-rather-long-namespace-name-for-research", "llama3-70b-pretrain-with-a-long-name", map[string]any{
				"nemo.run.id": "llama3-70b-run7", "dl.rank": "5", "dl.world_size": "8", "dl.local_rank": "1",
				"wandb.entity": "team", "wandb.project": "mine",
			}),
		},
		{
			name: "per-process id of the first rank of a single-node launch",
			in: map[string]any{
				"nemo.run.id": "a1b2c3d4e5f6", "host.name": "dgx-07", "service.name": "megatron",
				"nv.dl.rank": int64(0), "nv.dl.world_size": int64(8), "nv.dl.local_rank": int64(0),
			},
		},
		{
			name: "id already reconciled within a single-node launch",
			in: map[string]any{
				"nemo.run.id": "a1b2c3d4e5f6", "nemo.run_id_source": "single_node", "nemo.original_run_id": "0f0e0d0c0b0a",
				"host.name": "dgx-07", "nv.dl.rank": int64(3), "nv.dl.world_size": int64(8),
			},
		},
		{name: "id equal to an int slurm job id", in: map[string]any{"nemo.run.id": "123456789012", "slurm.job.id": int64(123456789012)}},
		{
			name: "id already derived from kubernetes keys",
			in:   k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": llamaJobID, "nemo.run_id_source": "job_keys"}),
		},
		{
			name:      "canonical ranks already present",
			configure: func(c *Config) { c.CanonicalRanks = true },
			in:        map[string]any{"nemo.run.id": "x", "dl.rank": "5", "nemo.rank": int64(5)},
		},
		{
			name:      "override with an equal id",
			configure: func(c *Config) { c.Override = true },
			env:       fakeEnv{"NEMO_LENS_RUN_ID": "job-7"},
			in:        map[string]any{"nemo.run.id": "job-7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProcessor(t, tt.configure, tt.env)
			attrs := resourceAttrs(t, tt.in)
			var tl tally
			allocs := testing.AllocsPerRun(200, func() { p.processResource(attrs, &tl) })
			assert.Zero(t, allocs)
			assert.Equal(t, tl.resources, tl.ids[outcomeKept], "the id was kept")
		})
	}
}

func TestOverrideWithoutCollectorIDFails(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Override = true
	fakeEnv{"NEMO_LENS_RUN_ID": " "}.apply(cfg)
	require.ErrorIs(t, cfg.Validate(), errOverrideWithoutRunID)
	_, err := newFactory(clock.Wall()).CreateTraces(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.ErrorIs(t, err, errOverrideWithoutRunID, "and at creation, unvalidated")
}

// The processor reads only its config: the collector's own environment,
// which the presets pass in with ${env:...}, changes nothing by itself.
func TestEnvironmentIsNotRead(t *testing.T) {
	for k, v := range map[string]string{
		"NEMO_LENS_RUN_ID": "exp-1", "MEGATRON_OTEL_RUN_ID": "m-1", "SLURM_JOB_ID": "99",
		"WANDB_ENTITY": "env-ent", "WANDB_PROJECT": "env-proj",
	} {
		t.Setenv(k, v)
	}
	cfg := createDefaultConfig().(*Config)
	assert.Empty(t, cfg.EnvRunIDs)
	got := allSignals(t, NewFactory(), processortest.NewNopSettings(metadata.Type), cfg, []map[string]any{{"service.name": "nemo"}})
	for _, signal := range []string{"traces", "metrics", "logs"} {
		assert.Equal(t, "generated", got[signal][0]["nemo.run_id_source"], signal)
		assert.NotContains(t, got[signal][0], "wandb.entity", signal)
		assert.NotContains(t, got[signal][0], "wandb.project", signal)
	}
}

// allSignals sends the same resources through traces, metrics and logs
// processors created by one factory and returns each output's resource
// attributes, per signal.
func allSignals(t *testing.T, f processor.Factory, set processor.Settings, cfg *Config, resources []map[string]any) map[string][]map[string]any {
	t.Helper()
	ctx := t.Context()
	out := map[string][]map[string]any{}

	traces := new(consumertest.TracesSink)
	tp, err := f.CreateTraces(ctx, set, cfg, traces)
	require.NoError(t, err)
	metrics := new(consumertest.MetricsSink)
	mp, err := f.CreateMetrics(ctx, set, cfg, metrics)
	require.NoError(t, err)
	logs := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(ctx, set, cfg, logs)
	require.NoError(t, err)
	for _, c := range []interface {
		Start(context.Context, component.Host) error
		Shutdown(context.Context) error
	}{tp, mp, lp} {
		require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
		t.Cleanup(func() { assert.NoError(t, c.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	}

	td, md, ld := ptrace.NewTraces(), pmetric.NewMetrics(), plog.NewLogs()
	for _, r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		require.NoError(t, rs.Resource().Attributes().FromRaw(r))
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName(attrkey.MegatronTrainStep)
		rm := md.ResourceMetrics().AppendEmpty()
		require.NoError(t, rm.Resource().Attributes().FromRaw(r))
		rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(2.5)
		rl := ld.ResourceLogs().AppendEmpty()
		require.NoError(t, rl.Resource().Attributes().FromRaw(r))
		rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("step done")
	}
	require.NoError(t, tp.ConsumeTraces(ctx, td))
	require.NoError(t, mp.ConsumeMetrics(ctx, md))
	require.NoError(t, lp.ConsumeLogs(ctx, ld))

	require.Len(t, traces.AllTraces(), 1)
	for i := 0; i < traces.AllTraces()[0].ResourceSpans().Len(); i++ {
		out["traces"] = append(out["traces"], traces.AllTraces()[0].ResourceSpans().At(i).Resource().Attributes().AsRaw())
	}
	require.Len(t, metrics.AllMetrics(), 1)
	for i := 0; i < metrics.AllMetrics()[0].ResourceMetrics().Len(); i++ {
		out["metrics"] = append(out["metrics"], metrics.AllMetrics()[0].ResourceMetrics().At(i).Resource().Attributes().AsRaw())
	}
	require.Len(t, logs.AllLogs(), 1)
	for i := 0; i < logs.AllLogs()[0].ResourceLogs().Len(); i++ {
		out["logs"] = append(out["logs"], logs.AllLogs()[0].ResourceLogs().At(i).Resource().Attributes().AsRaw())
	}
	return out
}

func TestAllSignals(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.WandbEntity, cfg.WandbProject = "nv", "llama"
	f := NewFactory()
	in := []map[string]any{
		k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "a1b2c3d4e5f6", "dl.rank": "1"}),
		k8sJob("ml", "llama-pretrain", map[string]any{"dl.rank": int64(2)}),
		{"nemo.run.id": "explicit-run", "wandb.project": "mine"},
	}
	want := []map[string]any{
		k8sJob("ml", "llama-pretrain", map[string]any{
			"nemo.run.id": llamaJobID, "nemo.original_run_id": "a1b2c3d4e5f6", "nemo.run_id_source": "job_keys",
			"dl.rank": "1", "wandb.entity": "nv", "wandb.project": "llama",
		}),
		k8sJob("ml", "llama-pretrain", map[string]any{
			"nemo.run.id": llamaJobID, "nemo.run_id_source": "job_keys",
			"dl.rank": int64(2), "wandb.entity": "nv", "wandb.project": "llama",
		}),
		{"nemo.run.id": "explicit-run", "wandb.entity": "nv", "wandb.project": "mine"},
	}
	got := allSignals(t, f, processortest.NewNopSettings(metadata.Type), cfg, in)
	for _, signal := range []string{"traces", "metrics", "logs"} {
		assert.Equal(t, want, got[signal], signal)
	}
}

func TestGeneratedIDSharedBySignalsOfOneCollector(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	in := []map[string]any{{"service.name": "nemo"}}

	first := allSignals(t, NewFactory(), processortest.NewNopSettings(metadata.Type), cfg, in)
	id := first["traces"][0]["nemo.run.id"]
	assert.Regexp(t, `^[0-9a-f]{12}$`, id)
	for _, signal := range []string{"metrics", "logs"} {
		assert.Equal(t, id, first[signal][0]["nemo.run.id"], signal)
		assert.Equal(t, "generated", first[signal][0]["nemo.run_id_source"], signal)
	}

	restarted := allSignals(t, NewFactory(), processortest.NewNopSettings(metadata.Type), cfg, in)
	assert.NotEqual(t, id, restarted["traces"][0]["nemo.run.id"], "a new collector start generates a new id")
}

func TestInternalMetrics(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	cfg := createDefaultConfig().(*Config)
	fakeEnv{"SLURM_JOB_ID": "99"}.apply(cfg)
	f := NewFactory()
	allSignals(t, f, metadatatest.NewSettings(tel), cfg, []map[string]any{
		{"nemo.run.id": "kept-run", "dl.rank": "zero", "dl.local_rank": int64(-2)},
		k8sJob("ml", "llama-pretrain", map[string]any{"nemo.run.id": "a1b2c3d4e5f6"}),
		k8sJob("ml", "llama-pretrain", nil),
		{"dl.rank": int64(4)},
	})

	var resources, ids, invalid []metricdata.DataPoint[int64]
	for _, signal := range []string{"traces", "metrics", "logs"} {
		sig := attribute.String("otel.signal", signal)
		resources = append(resources, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(sig), Value: 4})
		for _, o := range []string{"kept", "reconciled", "derived", "env"} {
			ids = append(ids, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(sig, attribute.String("outcome", o)), Value: 1})
		}
		for _, f := range []string{"rank", "local_rank"} {
			invalid = append(invalid, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(sig, attribute.String("rank_attribute", f)), Value: 1})
		}
	}
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualProcessorNemoRunResources(t, tel, resources, opts...)
	metadatatest.AssertEqualProcessorNemoRunIds(t, tel, ids, opts...)
	metadatatest.AssertEqualProcessorNemoRunInvalidRanks(t, tel, invalid, opts...)
}

func TestGarbageNeverPanics(t *testing.T) {
	p := newTestProcessor(t, func(c *Config) { c.CanonicalRanks = true; c.WandbEntity = "nv" }, nil)
	weird := []pcommon.Value{
		pcommon.NewValueEmpty(), pcommon.NewValueBool(true), pcommon.NewValueDouble(1.5),
		pcommon.NewValueBytes(), pcommon.NewValueMap(), pcommon.NewValueSlice(), pcommon.NewValueStr("\n"),
		pcommon.NewValueStr(strings.Repeat("x", 4096)), pcommon.NewValueInt(-1),
	}
	keys := []string{
		"nemo.run.id", "slurm.job.id", "nv.dl.job.uuid", "k8s.namespace.name", "k8s.job.name",
		"dl.rank", "nv.dl.world_size", "dl.local_rank", "wandb.entity", "nemo.original_run_id",
	}
	for _, v := range weird {
		attrs := pcommon.NewMap()
		for _, k := range keys {
			v.CopyTo(attrs.PutEmpty(k))
		}
		var tl tally
		assert.NotPanics(t, func() { p.processResource(attrs, &tl) }, v.Type().String())
		id, _ := attrs.Get(attrkey.RunID)
		assert.Equal(t, pcommon.ValueTypeStr, id.Type())
		assert.NotEmpty(t, id.Str())
	}
}
