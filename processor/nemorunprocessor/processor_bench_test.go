// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

// lensRank is one Megatron rank of a 64-rank job on Kubernetes as NeMo Lens
// sends it (bench/README.md, "What a rank sends"), with runID as its
// nemo.run.id ("" for none).
func lensRank(runID string, rank int) lensfixture.Rank {
	r := lensfixture.Rank{Run: runID, Rank: int64(rank), WorldSize: 64, ServiceName: "megatron"}
	kv := func(k string, v any) lensfixture.KeyValue { return lensfixture.KeyValue{Key: k, Value: v} }
	r.Extra = []lensfixture.KeyValue{
		kv("deployment.environment", "prod"), kv(attrkey.WandbEntity, "nv-research"), kv(attrkey.WandbProject, "llama3"),
		kv("dl.tensor_parallel.size", int64(8)), kv("dl.pipeline_parallel.size", int64(2)), kv("dl.data_parallel.size", int64(4)),
		kv(attrkey.K8sNamespaceName, "ml-training"), kv(attrkey.K8sJobName, "llama3-70b-pretrain"),
		kv("k8s.pod.name", fmt.Sprintf("llama3-70b-pretrain-%d-x7k2p", rank)), kv("k8s.node.name", r.Host()),
		kv("host.gpu.count", int64(8)),
	}
	return r
}

// lensResource is lensRank's resource attributes.
func lensResource(runID string, rank int) map[string]any {
	m := pcommon.NewMap()
	lensRank(runID, rank).PutResource(m)
	return m.AsRaw()
}

type benchCase struct {
	name      string
	configure func(*Config)
	env       fakeEnv
	runID     string // the sender's id; "" for none
	// derived: the sender's id is the job-derived id already (a second tier).
	derived bool
	drop    []string
	set     map[string]any
	// setup runs once on the processor before timing (single-node launches).
	setup func(b *testing.B, p *runProcessor)
	want  outcome
}

// bareTorchrun drops the Kubernetes job keys: a rank of a bare torchrun job
// of 8 ranks on one host.
var (
	bareTorchrun     = []string{"k8s.namespace.name", "k8s.job.name", "k8s.pod.name", "k8s.node.name"}
	bareTorchrunSize = map[string]any{"nv.dl.world_size": int64(8)}
)

// seeFirstRank shows the processor rank 0 of the bare torchrun job first,
// and lets its hold expire, so that the benchmarked rank 3 joins the
// decided launch at once.
func seeFirstRank(b *testing.B, p *runProcessor) {
	raw := lensResource("0f0e0d0c0b0a", 0)
	for _, k := range bareTorchrun {
		delete(raw, k)
	}
	raw["nv.dl.world_size"] = int64(8)
	var tl tally
	p.processResource(resourceAttrs(b, raw), &tl)
	require.Equal(b, int64(1), tl.ids[outcomeKept])
	p.clock.(*clocktest.Fake).Advance(defaultSingleNodeHold)
}

var benchCases = []benchCase{
	{name: "keep/explicit_id", runID: "llama3-70b-run7", want: outcomeKept},
	{name: "keep/already_reconciled", derived: true, want: outcomeKept},
	{name: "reconcile/per_process_id", runID: "a1b2c3d4e5f6", want: outcomeReconciled},
	{name: "derive/missing_id", want: outcomeDerived},
	{name: "fill/env", env: fakeEnv{"NEMO_LENS_RUN_ID": "exp-1"}, drop: []string{"k8s.job.name"}, want: outcomeEnv},
	{name: "fill/generated", drop: []string{"k8s.job.name"}, want: outcomeGenerated},
	{name: "single_node/first_rank", runID: "a1b2c3d4e5f6", drop: bareTorchrun, set: bareTorchrunSize, want: outcomeKept},
	{name: "single_node/reconcile", runID: "a1b2c3d4e5f6", drop: bareTorchrun, set: bareTorchrunSize, setup: seeFirstRank, want: outcomeReconciled},
}

func (bc benchCase) resource(b *testing.B, rank int) map[string]any {
	raw := lensResource(bc.runID, rank)
	if bc.derived {
		raw[attrkey.RunID] = derivedRunID(b, resourceAttrs(b, raw), []string{"k8s.namespace.name", "k8s.job.name"})
	}
	for _, k := range bc.drop {
		delete(raw, k)
	}
	maps.Copy(raw, bc.set)
	return raw
}

// BenchmarkProcessResource measures the work per resource. Resources are
// fresh copies (exact capacity, as decoded from OTLP) so that writes pay
// their real cost; copying happens with the timer stopped.
func BenchmarkProcessResource(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			p := newTestProcessor(b, bc.configure, bc.env)
			if bc.setup != nil {
				bc.setup(b, p)
			}
			template := resourceAttrs(b, bc.resource(b, 3))
			var tl tally
			b.ReportAllocs()
			if bc.want == outcomeKept {
				// Nothing is written (TestKeptRunIDDoesNotAllocate), so one
				// resource can be processed again and again.
				for b.Loop() {
					p.processResource(template, &tl)
				}
				require.Equal(b, tl.resources, tl.ids[outcomeKept])
				return
			}
			const chunk = 1024
			fresh := make([]pcommon.Map, chunk)
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				n := min(chunk, b.N-done)
				for i := range n {
					fresh[i] = pcommon.NewMap()
					template.CopyTo(fresh[i])
				}
				b.StartTimer()
				for i := range n {
					p.processResource(fresh[i], &tl)
				}
				done += n
			}
			b.StopTimer()
			require.Equal(b, int64(b.N), tl.ids[bc.want], "every resource took the %s path", outcomeNames[bc.want])
		})
	}
}

// pipelineShapes are the batch shapes the pipeline benchmarks use.
var pipelineShapes = []struct {
	name             string
	resources, spans int
}{
	{"1x512", 1, 512}, // one rank's BatchSpanProcessor export
	{"64x8", 64, 8},   // a gateway batch of many small rank exports: the worst case
}

// otlpPayload encodes a batch of resources x spans: each rank's Megatron
// train steps from iteration 0, cut after spans spans as a rank's
// BatchSpanProcessor cuts its exports.
func otlpPayload(b *testing.B, bc benchCase, resources, spans int) []byte {
	var run lensfixture.Run
	for r := range resources {
		run.Ranks = append(run.Ranks, lensRank(bc.runID, r))
	}
	td := ptrace.NewTraces()
	for _, rank := range run.Ranks {
		rs := td.ResourceSpans().AppendEmpty()
		require.NoError(b, rs.Resource().Attributes().FromRaw(bc.resource(b, int(rank.Rank))))
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(lensfixture.ScopeName)
		run.AppendSpans(ss.Spans(), rank, spans)
		for i := range ss.Spans().Len() {
			putSpanAttributes(ss.Spans().At(i), rank.Rank)
		}
	}
	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(b, err)
	return payload
}

// putSpanAttributes adds to a fixture span what Megatron-LM sets on it, so
// that the payload is as large as a rank's: the iteration and the pipeline
// rank on every span (the fixture sets the iteration on step spans only),
// the loss and gradient norm on the step span.
func putSpanAttributes(span ptrace.Span, rank int64) {
	iteration := lensfixture.ParseSpanID(span.SpanID()).Iteration
	span.Attributes().PutInt(attrkey.MegatronIteration, iteration)
	span.Attributes().PutInt("dl.pipeline_parallel.rank", rank%2)
	if span.Name() == attrkey.MegatronTrainStep {
		span.Attributes().PutDouble("megatron.loss", lensfixture.Loss(iteration))
		span.Attributes().PutDouble("megatron.grad_norm", 1.25)
	}
}

func passThrough(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil }

// pipeline is a minimal receive -> process -> export path: it decodes an
// OTLP request, runs it through a processorhelper processor (pass-through or
// nemo_run) and encodes the result, as an OTLP exporter would.
type pipeline struct {
	proc        processor.Traces
	unmarshaler ptrace.ProtoUnmarshaler
}

func newPipeline(b *testing.B, bc benchCase, withNemoRun bool) *pipeline {
	var marshaler ptrace.ProtoMarshaler
	exporter, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		_, err := marshaler.MarshalTraces(td)
		return err
	})
	require.NoError(b, err)
	set := processortest.NewNopSettings(metadata.Type)
	var proc processor.Traces
	if withNemoRun {
		cfg := createDefaultConfig().(*Config)
		bc.env.apply(cfg)
		proc, err = NewFactory().CreateTraces(b.Context(), set, cfg, exporter)
	} else {
		proc, err = processorhelper.NewTraces(b.Context(), set, createDefaultConfig(), exporter, passThrough,
			processorhelper.WithCapabilities(processorCapabilities))
	}
	require.NoError(b, err)
	require.NoError(b, proc.Start(b.Context(), componenttest.NewNopHost()))
	b.Cleanup(func() { require.NoError(b, proc.Shutdown(context.Background())) }) //nolint:usetesting // b.Context() is canceled before Cleanup runs
	return &pipeline{proc: proc}
}

func (p *pipeline) run(b *testing.B, payload []byte) {
	batch, err := p.unmarshaler.UnmarshalTraces(payload)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.proc.ConsumeTraces(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPipeline runs the same OTLP batches through the pipeline with a
// pass-through processor (baseline) and with nemo_run, as sibling
// sub-benchmarks: compare their ns/op and allocs/op.
func BenchmarkPipeline(b *testing.B) {
	for _, bc := range benchCases[:4] {
		for _, shape := range pipelineShapes {
			payload := otlpPayload(b, bc, shape.resources, shape.spans)
			for _, variant := range []string{"passthrough", "nemo_run"} {
				b.Run(fmt.Sprintf("%s/%s/%s", bc.name, shape.name, variant), func(b *testing.B) {
					p := newPipeline(b, bc, variant == "nemo_run")
					b.ReportAllocs()
					b.SetBytes(int64(len(payload)))
					for b.Loop() {
						p.run(b, payload)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*shape.resources*shape.spans), "ns/span")
				})
			}
		}
	}
}

// BenchmarkPipelineOverhead measures nemo_run's share of a pass-through
// pipeline directly. Batch by batch, it runs the pass-through pipeline, then
// decodes the same request again and times nemo_run's processing of it alone
// (with real internal-metrics instruments). Both therefore see the same
// machine load, and the ratio does not drown in the noise of two separate
// end-to-end timings. Adding nemo_run to a pipeline adds exactly this work:
// the processorhelper hop it runs in is already in the baseline.
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, bc := range benchCases[:4] {
		for _, shape := range pipelineShapes {
			payload := otlpPayload(b, bc, shape.resources, shape.spans)
			b.Run(bc.name+"/"+shape.name, func(b *testing.B) {
				base := newPipeline(b, bc, false)
				tel := componenttest.NewTelemetry()
				b.Cleanup(func() { require.NoError(b, tel.Shutdown(context.Background())) }) //nolint:usetesting // b.Context() is canceled before Cleanup runs
				set := processortest.NewNopSettings(metadata.Type)
				set.TelemetrySettings = tel.NewTelemetrySettings()
				cfg := createDefaultConfig().(*Config)
				bc.env.apply(cfg)
				run, err := newRunProcessor(set, cfg, "traces", testGenerated)
				require.NoError(b, err)
				b.Cleanup(func() { require.NoError(b, run.shutdown(context.Background())) }) //nolint:usetesting // b.Context() is canceled before Cleanup runs

				var baseNs, runNs time.Duration
				for b.Loop() {
					start := time.Now()
					base.run(b, payload)
					baseNs += time.Since(start)

					batch, err := base.unmarshaler.UnmarshalTraces(payload)
					if err != nil {
						b.Fatal(err)
					}
					start = time.Now()
					if _, err := run.processTraces(b.Context(), batch); err != nil {
						b.Fatal(err)
					}
					runNs += time.Since(start)
				}
				b.ReportMetric(float64(baseNs.Nanoseconds())/float64(b.N), "passthrough-ns/batch")
				b.ReportMetric(float64(runNs.Nanoseconds())/float64(b.N), "nemo_run-ns/batch")
				b.ReportMetric(100*float64(runNs)/float64(baseNs), "overhead-%")
			})
		}
	}
}
