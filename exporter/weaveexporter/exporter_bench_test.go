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
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/procstat"
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

func benchTraces(s benchShape) ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range benchRanks {
		rs := td.ResourceSpans().AppendEmpty()
		a := rs.Resource().Attributes()
		a.PutStr("service.name", "megatron")
		a.PutStr("service.instance.id", fmt.Sprintf("run-7f3a-rank%d", r))
		a.PutStr("host.name", fmt.Sprintf("dgx-%03d", r/8))
		a.PutInt("dl.rank", int64(r))
		a.PutInt("dl.world_size", benchRanks)
		a.PutInt("dl.local_rank", int64(r%8))
		a.PutStr("deployment.environment", "prod")
		if s.linkRuns {
			a.PutStr("nemo.run.id", "7f3a9c1e2b4d")
		}
		if s.slurm {
			a.PutStr("slurm.job.id", "123456")
			a.PutStr("slurm.job.id.raw", "123456")
			a.PutStr("slurm.job.name", "llama-pretrain")
			a.PutStr("slurm.partition", "batch")
		}
		if s.noProjectEvery == 0 || r%s.noProjectEvery != 0 {
			a.PutStr("wandb.entity", "acme")
			a.PutStr("wandb.project", fmt.Sprintf("llm-%d", r%s.projects))
		}
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("nemo_lens")
		ss.Scope().SetVersion("0.4.0")
		start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		for i := range benchSpansPerRank {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{0x7f, 0x3a, byte(r), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
			sp.SetSpanID(pcommon.SpanID{byte(r), byte(i >> 8), byte(i), 1, 2, 3, 4, 5})
			sp.SetParentSpanID(pcommon.SpanID{byte(r), 0, 0, 9, 9, 9, 9, 9})
			sp.SetKind(ptrace.SpanKindInternal)
			t0 := start.Add(time.Duration(i) * 350 * time.Millisecond)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(340 * time.Millisecond)))
			attrs := sp.Attributes()
			switch i % 4 {
			case 0:
				sp.SetName("megatron.train_step")
				attrs.PutInt("megatron.iteration", int64(i/4))
				attrs.PutDouble("megatron.loss", 2.5-float64(i)/10000)
				attrs.PutDouble("megatron.grad_norm", 1.25)
				attrs.PutInt("megatron.num_microbatches", 8)
				attrs.PutBool("megatron.update_successful", true)
			case 1:
				sp.SetName("megatron.forward_backward")
				attrs.PutInt("megatron.iteration", int64(i/4))
				attrs.PutInt("dl.pipeline_parallel.rank", int64(r%4))
			case 2:
				sp.SetName("megatron.grad_sync.finish")
				attrs.PutInt("megatron.iteration", int64(i/4))
				ev := sp.Events().AppendEmpty()
				ev.SetName("allreduce.done")
				ev.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(300 * time.Millisecond)))
				ev.Attributes().PutInt("bytes", 1<<28)
			default:
				sp.SetName("megatron.optimizer_step")
				attrs.PutInt("megatron.iteration", int64(i/4))
				attrs.PutDouble("megatron.learning_rate", 3e-4)
			}
			if s.spanConflictEvery > 0 && i%s.spanConflictEvery == 0 {
				attrs.PutStr("megatron", "core")
			}
		}
	}
	td.MarkReadOnly()
	return td
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
