// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
)

const (
	benchRanks        = 16
	benchSpansPerRank = 512 // 8192 spans: the batch processor's default batch
)

// benchShape is a batch as a Megatron job of benchRanks ranks sends it.
type benchShape struct {
	name string
	// projects spreads the ranks over that many W&B projects.
	projects int
	// slurm adds slurm.job.id and slurm.job.id.raw: a resource rename.
	slurm bool
	// noProjectEvery leaves wandb.entity/wandb.project off every n-th rank:
	// the exporter's defaults are inserted.
	noProjectEvery int
	// linkRuns sets nemo.run.id and run_id_attribute: every span gets
	// wandb.wb_run_id.
	linkRuns bool
	// spanConflictEvery gives every n-th span a conflicting key: a span copy.
	spanConflictEvery int
}

var benchShapes = []benchShape{
	{name: "one_project", projects: 1},
	{name: "four_projects", projects: 4},
	{name: "nemo_slurm_defaults", projects: 1, slurm: true, noProjectEvery: 2},
	{name: "nemo_slurm_defaults_runlink", projects: 1, slurm: true, noProjectEvery: 2, linkRuns: true},
	{name: "span_conflicts_10pct", projects: 1, spanConflictEvery: 10},
}

// benchRank is rank r as the job of shape s sends it: the fixture's
// identity (dl.* keys) plus the shape's W&B and SLURM attributes.
func benchRank(s benchShape, r int) lensfixture.Rank {
	kv := func(k string, v any) lensfixture.KeyValue { return lensfixture.KeyValue{Key: k, Value: v} }
	rank := lensfixture.Rank{
		Rank: int64(r), WorldSize: benchRanks, LegacyKeys: true, ServiceName: "megatron",
		Extra: []lensfixture.KeyValue{kv("deployment.environment", "prod")},
	}
	if s.linkRuns {
		rank.Run = "7f3a9c1e2b4d"
	}
	if s.slurm {
		rank.Extra = append(rank.Extra, kv("slurm.job.id", "123456"), kv("slurm.job.id.raw", "123456"),
			kv("slurm.job.name", "llama-pretrain"), kv("slurm.partition", "batch"))
	}
	if s.noProjectEvery == 0 || r%s.noProjectEvery != 0 {
		rank.Extra = append(rank.Extra, kv(attrkey.WandbEntity, "acme"), kv(attrkey.WandbProject, fmt.Sprintf("llm-%d", r%s.projects)))
	}
	return rank
}

// benchTraces is every rank's export of benchSpansPerRank spans: its steps
// from iteration 0, cut where the BatchSpanProcessor cuts, with the
// attributes Megatron-LM puts on each span.
func benchTraces(s benchShape) ptrace.Traces {
	var run lensfixture.Run
	for r := range benchRanks {
		run.Ranks = append(run.Ranks, benchRank(s, r))
	}
	td := ptrace.NewTraces()
	for _, rank := range run.Ranks {
		spans := lensfixture.AppendResource(td, rank)
		run.AppendSpans(spans, rank, benchSpansPerRank)
		for i := range spans.Len() {
			putBenchAttributes(spans.At(i), rank.Rank)
			if s.spanConflictEvery > 0 && i%s.spanConflictEvery == 0 {
				spans.At(i).Attributes().PutStr("megatron", "core")
			}
		}
	}
	td.MarkReadOnly()
	return td
}

// putBenchAttributes adds to a fixture span what Megatron-LM sets on it:
// the iteration and the pipeline rank on every span (the fixture sets the
// iteration on step spans only), the step's metrics, the all-reduce's
// completion event and the learning rate.
func putBenchAttributes(sp ptrace.Span, rank int64) {
	iteration := lensfixture.ParseSpanID(sp.SpanID()).Iteration
	attrs := sp.Attributes()
	attrs.PutInt(attrkey.MegatronIteration, iteration)
	attrs.PutInt("dl.pipeline_parallel.rank", rank%4)
	switch sp.Name() {
	case attrkey.MegatronTrainStep:
		attrs.PutDouble("megatron.loss", lensfixture.Loss(iteration))
		attrs.PutDouble("megatron.grad_norm", 1.25)
		attrs.PutInt("megatron.num_microbatches", 8)
		attrs.PutBool("megatron.update_successful", true)
	case lensfixture.GradSyncFinish:
		ev := sp.Events().AppendEmpty()
		ev.SetName("allreduce.done")
		ev.SetTimestamp(sp.EndTimestamp())
		ev.Attributes().PutInt("bytes", 1<<28)
	case lensfixture.Optimizer:
		attrs.PutDouble("megatron.learning_rate", 3e-4)
	}
}

// drainServer reads every request body and answers an empty 200, as Weave
// does on success. Both exporters send to the same one.
func drainServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func startBenchExporter(b *testing.B, f exporter.Factory, cfg component.Config) exporter.Traces {
	exp, err := f.CreateTraces(b.Context(), exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := exp.Start(b.Context(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exp.Shutdown(context.Background()) }) //nolint:usetesting // b.Context() is already canceled when Cleanup functions run
	return exp
}

func stockExporter(b *testing.B, srv *httptest.Server) exporter.Traces {
	f := otlphttpexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlphttpexporter.Config)
	cfg.ClientConfig.Endpoint = srv.URL
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig = configretry.BackOffConfig{Enabled: false}
	return startBenchExporter(b, f, cfg)
}

func weaveBenchExporter(b *testing.B, srv *httptest.Server, shape benchShape) exporter.Traces {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = srv.URL + "/otel/v1/traces"
	cfg.APIKey = "bench-key"
	cfg.Entity = "acme"
	cfg.Project = "llm-0"
	if shape.linkRuns {
		cfg.RunIDAttribute = "nemo.run.id"
	}
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig = configretry.BackOffConfig{Enabled: false}
	return startBenchExporter(b, f, cfg)
}

// BenchmarkExport measures the whole export path (regroup by project,
// sanitize, encode, gzip, HTTP) of the stock otlp_http exporter and of
// weave, sending the same read-only batches to the same local server, both
// without queue or retry.
func BenchmarkExport(b *testing.B) {
	srv := drainServer(b)
	for _, shape := range benchShapes {
		td := benchTraces(shape)
		spans := td.SpanCount()
		b.Run(shape.name+"/otlp_http", func(b *testing.B) {
			runExportBench(b, stockExporter(b, srv), td, spans)
		})
		b.Run(shape.name+"/weave", func(b *testing.B) {
			runExportBench(b, weaveBenchExporter(b, srv, shape), td, spans)
		})
	}
}

// BenchmarkExportPaired sends each batch with otlp_http then weave in every
// iteration, so that both see the same machine load, and reports for each
// the wall time and the process CPU time per batch, and their ratios
// otlp_http / weave (1 = as fast; the goal is >= 0.9). On a shared machine
// the CPU ratio is the steadier one.
func BenchmarkExportPaired(b *testing.B) {
	srv := drainServer(b)
	for _, shape := range benchShapes {
		td := benchTraces(shape)
		b.Run(shape.name, func(b *testing.B) {
			stock, weave := stockExporter(b, srv), weaveBenchExporter(b, srv, shape)
			ctx := b.Context()
			var stockWall, weaveWall, stockCPU, weaveCPU time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0, c0 := time.Now(), procstat.SelfCPU()
				if err := stock.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), procstat.SelfCPU()
				if err := weave.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
				stockWall += t1.Sub(t0)
				weaveWall += time.Since(t1)
				stockCPU += c1 - c0
				weaveCPU += procstat.SelfCPU() - c1
			}
			n := float64(b.N)
			b.ReportMetric(stockWall.Seconds()*1000/n, "otlp_http_ms/op")
			b.ReportMetric(weaveWall.Seconds()*1000/n, "weave_ms/op")
			b.ReportMetric(stockWall.Seconds()/weaveWall.Seconds(), "wall_ratio")
			if weaveCPU > 0 {
				b.ReportMetric(stockCPU.Seconds()*1000/n, "otlp_http_cpu_ms/op")
				b.ReportMetric(weaveCPU.Seconds()*1000/n, "weave_cpu_ms/op")
				b.ReportMetric(stockCPU.Seconds()/weaveCPU.Seconds(), "cpu_ratio")
			}
		})
	}
}

func runExportBench(b *testing.B, exp exporter.Traces, td ptrace.Traces, spans int) {
	b.ReportAllocs()
	ctx := b.Context()
	for b.Loop() {
		if err := exp.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkRegroup measures what the weave exporter adds before the HTTP
// client compresses: regrouping, sanitizing and streaming every request.
func BenchmarkRegroup(b *testing.B) {
	for _, shape := range benchShapes {
		td := benchTraces(shape)
		r := router{entity: "acme", project: "llm-0"}
		if shape.linkRuns {
			r.runIDAttribute = "nemo.run.id"
		}
		b.Run(shape.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bt, err := r.split(td)
				if err != nil {
					b.Fatal(err)
				}
				for _, req := range bt.requests(defaultMaxRequestBytes) {
					stream, _ := bt.stream(req)
					if _, err := io.Copy(io.Discard, stream); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	b.Run("marshal_only_for_reference", func(b *testing.B) {
		td := benchTraces(benchShapes[0])
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td); err != nil {
				b.Fatal(err)
			}
		}
	})
}
