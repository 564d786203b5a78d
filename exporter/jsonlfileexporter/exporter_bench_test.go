// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The benchmarks push the same Megatron-shaped batches (8 ranks x 125
// records = 1,000 spans, data points or log records, ~20 attributes per
// span) through this exporter and through the stock contrib file exporter
// (format: json), both writing to files in a temp dir with the same
// rotation (64 MiB, one backup) so the disk use stays bounded. Both run
// without a sending queue, so ConsumeX returns when the batch is encoded
// and handed to the file. Compare with:
//
//	go test -run '^$' -bench 'BenchmarkJSONL' -benchtime=1s ./exporter/jsonlfileexporter/
//
// Reported: records/s, allocs/record (all allocations during the loop
// divided by the records sent).

const benchRanks, benchPerRank = 8, 125

type benchTarget struct {
	name  string
	build func(dir string) (component.Config, exporter.Factory)
}

func benchTargets() []benchTarget {
	return []benchTarget{
		{"jsonl_file", func(dir string) (component.Config, exporter.Factory) {
			cfg := testConfig(dir)
			cfg.Rotation = RotationConfig{MaxMegabytes: 64, MaxBackups: 1}
			return cfg, NewFactory()
		}},
		{"stock_file_json", func(dir string) (component.Config, exporter.Factory) {
			f := fileexporter.NewFactory()
			cfg := f.CreateDefaultConfig().(*fileexporter.Config)
			cfg.Path = filepath.Join(dir, "out.json")
			cfg.FormatType = "json"
			cfg.Rotation = &fileexporter.Rotation{MaxMegabytes: 64, MaxBackups: 1}
			return cfg, f
		}},
	}
}

// runBench starts the exporter, calls consume b.N times and reports
// throughput and allocations per record.
func runBench(b *testing.B, start func(dir string) (component.Component, func() error), records int) {
	dir := b.TempDir()
	c, consume := start(dir)
	ctx := b.Context()
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	// One warm-up batch fills the pools and opens the files.
	if err := consume(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		if err := consume(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	total := float64(b.N * records)
	b.ReportMetric(total/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/record")
	if err := c.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}

func benchSettings(f exporter.Factory) exporter.Settings {
	return exportertest.NewNopSettings(f.Type())
}

func BenchmarkJSONLTraces(b *testing.B) {
	td := megatronTraces(benchRanks, benchPerRank)
	td.MarkReadOnly()
	for _, target := range benchTargets() {
		b.Run(target.name, func(b *testing.B) {
			runBench(b, func(dir string) (component.Component, func() error) {
				cfg, f := target.build(dir)
				exp, err := f.CreateTraces(b.Context(), benchSettings(f), cfg)
				if err != nil {
					b.Fatal(err)
				}
				return exp, func() error { return exp.ConsumeTraces(b.Context(), td) }
			}, td.SpanCount())
		})
	}
}

func BenchmarkJSONLMetrics(b *testing.B) {
	md := megatronMetrics(benchRanks, benchPerRank)
	md.MarkReadOnly()
	for _, target := range benchTargets() {
		b.Run(target.name, func(b *testing.B) {
			runBench(b, func(dir string) (component.Component, func() error) {
				cfg, f := target.build(dir)
				exp, err := f.CreateMetrics(b.Context(), benchSettings(f), cfg)
				if err != nil {
					b.Fatal(err)
				}
				return exp, func() error { return exp.ConsumeMetrics(b.Context(), md) }
			}, md.DataPointCount())
		})
	}
}

func BenchmarkJSONLLogs(b *testing.B) {
	ld := megatronLogs(benchRanks, benchPerRank)
	ld.MarkReadOnly()
	for _, target := range benchTargets() {
		b.Run(target.name, func(b *testing.B) {
			runBench(b, func(dir string) (component.Component, func() error) {
				cfg, f := target.build(dir)
				exp, err := f.CreateLogs(b.Context(), benchSettings(f), cfg)
				if err != nil {
					b.Fatal(err)
				}
				return exp, func() error { return exp.ConsumeLogs(b.Context(), ld) }
			}, ld.LogRecordCount())
		})
	}
}

// BenchmarkJSONLEncodeSpans isolates the encoders: this exporter's record
// encoder against the pdata OTLP/JSON marshaler the stock exporter uses.
func BenchmarkJSONLEncodeSpans(b *testing.B) {
	td := megatronTraces(benchRanks, benchPerRank)
	spans := float64(td.SpanCount())
	b.Run("jsonl_file", func(b *testing.B) {
		var e recordEncoder
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = buf[:0]
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				buf, _ = e.appendResourceSpans(buf, td.ResourceSpans().At(i))
			}
		}
		b.ReportMetric(spans*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("pdata_json", func(b *testing.B) {
		var m ptrace.JSONMarshaler
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.MarshalTraces(td); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(spans*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
