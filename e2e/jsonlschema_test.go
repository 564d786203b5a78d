// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/randpdata"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The jsonl_file exporter's records against the JSON Schemas it ships
// (exporter/jsonlfileexporter/schema/), which readers of its files validate
// with. These tests live here, not in the component's package, so that the
// components' module does not require a JSON Schema validator: a
// distribution importing the exporter would inherit it. They run the
// exporter in-process, built by its factory as the collector builds it, and
// need no binary.

const jsonlDir = "exporter/jsonlfileexporter"

// compileSchema compiles one of the shipped schemas; compiling also checks
// the schema against the JSON Schema 2020-12 meta-schema.
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join(testcollector.RepoRoot(t), jsonlDir, "schema", name))
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return sch
}

// jsonlLines reads a JSONL file, which must end with a line end.
func jsonlLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		t.Fatalf("%s is empty or does not end with a line end", path)
	}
	return bytes.Split(data[:len(data)-1], []byte{'\n'})
}

func validateLines(t *testing.T, sch *jsonschema.Schema, path string) {
	t.Helper()
	lines := jsonlLines(t, path)
	for _, line := range lines {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatalf("%s: %v: %s", path, err, line)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: %v\nline: %s", path, err, line)
		}
	}
	t.Logf("%s: %d records valid", filepath.Base(path), len(lines))
}

// goldenRecords is a file of the exporter's golden records: every field and
// the awkward values (escapes, invalid UTF-8, NaN, infinities, nesting).
// The exporter's own TestSpanRecordsGolden and siblings keep them equal to
// what its encoder writes, byte for byte.
func goldenRecords(t *testing.T, name string) string {
	return filepath.Join(testcollector.RepoRoot(t), jsonlDir, "testdata", "golden", name)
}

func TestJSONLGoldenRecordsMatchSchema(t *testing.T) {
	validateLines(t, compileSchema(t, "span.schema.json"), goldenRecords(t, "spans.jsonl"))
	validateLines(t, compileSchema(t, "metric.schema.json"), goldenRecords(t, "metrics.jsonl"))
	validateLines(t, compileSchema(t, "log.schema.json"), goldenRecords(t, "logs.jsonl"))
}

// writeJSONL runs the jsonl_file exporter on td, md and ld and returns the
// directory of traces.jsonl, metrics.jsonl and logs.jsonl.
func writeJSONL(t *testing.T, td ptrace.Traces, md pmetric.Metrics, ld plog.Logs) string {
	t.Helper()
	f := jsonlfileexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*jsonlfileexporter.Config)
	cfg.Directory = t.TempDir()
	cfg.TracesPath, cfg.MetricsPath, cfg.LogsPath = "traces.jsonl", "metrics.jsonl", "logs.jsonl"
	// No queue and no retries: Consume returns once the records are written.
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set := exportertest.NewNopSettings(f.Type())
	ctx := t.Context()
	te, err := f.CreateTraces(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	me, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	le, err := f.CreateLogs(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := []component.Component{te, me, le}
	for _, c := range all {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{te.ConsumeTraces(ctx, td), me.ConsumeMetrics(ctx, md), le.ConsumeLogs(ctx, ld)} {
		if err != nil {
			t.Error(err)
		}
	}
	// Shutdown flushes and closes the files.
	for _, c := range all {
		if err := c.Shutdown(context.Background()); err != nil { //nolint:usetesting // shutdown must run whatever became of the test's context
			t.Error(err)
		}
	}
	return cfg.Directory
}

// lensRecords is what a synchronous job of 4 ranks (the fleet's mixed
// attribute spellings) sends in each of the four step shapes: model set-up,
// steps, a checkpoint and the run-long spans; its training metrics; and one
// log line per step.
func lensRecords() (ptrace.Traces, pmetric.Metrics, plog.Logs) {
	td, md, ld := ptrace.NewTraces(), pmetric.NewMetrics(), plog.NewLogs()
	const steps = 3
	for i, shape := range lensfixture.Shapes {
		run := lensfixture.Run{Shape: shape, Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-" + shape.String(), WorldSize: 4, ServiceName: "megatron"})}
		for _, rank := range run.Ranks {
			spans := lensfixture.AppendResource(td, rank)
			run.AppendModelInit(spans, rank)
			for it := range int64(steps) {
				run.AppendStep(spans, rank, it)
			}
			run.AppendCheckpoint(spans, rank, steps-1)
			run.AppendJobEnd(spans, rank, steps-1)
			if i > 0 {
				continue // one shape's metrics and logs: their records do not depend on the shape
			}
			rm := md.ResourceMetrics().AppendEmpty()
			rank.PutResource(rm.Resource().Attributes())
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(lensfixture.ScopeName)
			rl := ld.ResourceLogs().AppendEmpty()
			rank.PutResource(rl.Resource().Attributes())
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName("megatron.training")
			for it := range int64(steps) {
				run.AppendMetrics(sm.Metrics(), rank, it)
				lr := run.AppendLog(sl.LogRecords(), rank, it, plog.SeverityNumberInfo, fmt.Sprintf(" iteration %8d/  500000 | lm loss: %E |", it, lensfixture.Loss(it)))
				lr.SetTraceID(run.TraceID(rank, it))
				lr.SetSpanID(lensfixture.SpanID(lensfixture.KindStep, rank.Rank, it, 0))
			}
		}
	}
	return td, md, ld
}

func TestJSONLRecordsMatchSchema(t *testing.T) {
	span := compileSchema(t, "span.schema.json")
	metric := compileSchema(t, "metric.schema.json")
	log := compileSchema(t, "log.schema.json")

	t.Run("nemo_lens_job", func(t *testing.T) {
		td, md, ld := lensRecords()
		dir := writeJSONL(t, td, md, ld)
		validateLines(t, span, filepath.Join(dir, "traces.jsonl"))
		validateLines(t, metric, filepath.Join(dir, "metrics.jsonl"))
		validateLines(t, log, filepath.Join(dir, "logs.jsonl"))
	})
	t.Run("random_spans", func(t *testing.T) {
		td := randpdata.Traces(rand.New(rand.NewPCG(5, 6)), 200)
		dir := writeJSONL(t, td, pmetric.NewMetrics(), plog.NewLogs())
		validateLines(t, span, filepath.Join(dir, "traces.jsonl"))
	})
}

// TestJSONLSchemasRejectMalformedRecords shows the schemas are strict
// enough to catch the mistakes they exist for.
func TestJSONLSchemasRejectMalformedRecords(t *testing.T) {
	span := compileSchema(t, "span.schema.json")
	metric := compileSchema(t, "metric.schema.json")
	log := compileSchema(t, "log.schema.json")
	goodSpan := string(jsonlLines(t, goldenRecords(t, "spans.jsonl"))[0])
	goodGauge := string(jsonlLines(t, goldenRecords(t, "metrics.jsonl"))[0])
	for _, tc := range []struct {
		name   string
		sch    *jsonschema.Schema
		record string
	}{
		{"span without status", span, replaceOnce(t, goodSpan, `"status":"StatusCode.UNSET",`, ``)},
		{"span with OTLP status", span, replaceOnce(t, goodSpan, `"StatusCode.UNSET"`, `"STATUS_CODE_UNSET"`)},
		{"span with upper-case id", span, replaceOnce(t, goodSpan, `"a1a2a3a4a5a6a7a8"`, `"A1A2A3A4A5A6A7A8"`)},
		{"span with empty parent", span, replaceOnce(t, goodSpan, `"parent_id":null`, `"parent_id":""`)},
		{"span with unknown key", span, replaceOnce(t, goodSpan, `{"name"`, `{"extra":1,"name"`)},
		{"span with zero dropped count", span, replaceOnce(t, goodSpan, `"links":[]`, `"links":[],"dropped_links_count":0`)},
		{"span with negative time", span, replaceOnce(t, goodSpan, `"start_time_unix_nano":1748779200000000000`, `"start_time_unix_nano":-1`)},
		{"gauge with bare NaN-like string", metric, replaceOnce(t, goodGauge, `"value":2.5`, `"value":"nan"`)},
		{"gauge with histogram keys", metric, replaceOnce(t, goodGauge, `"value":2.5`, `"value":2.5,"bucket_counts":[]`)},
		{"gauge without value", metric, replaceOnce(t, goodGauge, `,"value":2.5`, ``)},
		{"unknown metric type", metric, replaceOnce(t, goodGauge, `"type":"gauge"`, `"type":"counter"`)},
		{"log without body", log, `{"time_unix_nano":0,"observed_time_unix_nano":0,"severity_number":0,"severity_text":"","attributes":{},"trace_id":null,"span_id":null,"resource":{},"scope":{"name":"","version":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.record))
			if err != nil {
				t.Fatalf("%v: %s", err, tc.record)
			}
			if tc.sch.Validate(inst) == nil {
				t.Errorf("the schema accepts %s", tc.record)
			}
		})
	}
}

// replaceOnce replaces the first old in s, which must hold it.
func replaceOnce(t *testing.T, s, old, repl string) string {
	t.Helper()
	before, after, found := strings.Cut(s, old)
	if !found {
		t.Fatalf("%q not in record %s", old, s)
	}
	return before + repl + after
}
