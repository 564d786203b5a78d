package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// telemetry is what a preset wrote to its output directory.
type telemetry struct {
	lensemu.Result
	// ByRank counts items per rank (-1: no valid rank attribute).
	ByRank map[int64]lensemu.Result
	// ByRun counts items per nemo.run.id ("" for none).
	ByRun map[string]lensemu.Result
	// ErrorSpans lists "rank/span name" of every span with status ERROR.
	ErrorSpans []string
	// Severities counts log records per rank and severity text, "rank/TEXT".
	Severities map[string]int
}

// add counts n items of a resource.
func (got *telemetry) add(res pcommon.Resource, n lensemu.Result) {
	got.Result = got.Result.Add(n)
	rank := rankOf(res)
	got.ByRank[rank] = got.ByRank[rank].Add(n)
	runID := ""
	if v, ok := res.Attributes().Get("nemo.run.id"); ok {
		runID = v.AsString()
	}
	got.ByRun[runID] = got.ByRun[runID].Add(n)
}

func rankOf(res pcommon.Resource) int64 {
	rank, _, st := rankattr.Lookup(res.Attributes(), rankattr.DefaultRankKeys)
	if st != rankattr.Valid {
		return -1
	}
	return rank
}

// readTelemetry parses the file preset's output: one OTLP/JSON export request
// per line in traces.json, metrics.json and logs.json.
func readTelemetry(t *testing.T, dir string) telemetry {
	t.Helper()
	got := telemetry{ByRank: map[int64]lensemu.Result{}, ByRun: map[string]lensemu.Result{}, Severities: map[string]int{}}
	eachLine(t, filepath.Join(dir, "traces.json"), func(line []byte) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("traces.json: %v", err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			n := 0
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					if spans.At(k).Status().Code() == ptrace.StatusCodeError {
						got.ErrorSpans = append(got.ErrorSpans, fmt.Sprintf("%d/%s", rankOf(rs.Resource()), spans.At(k).Name()))
					}
				}
				n += spans.Len()
			}
			got.add(rs.Resource(), lensemu.Result{Spans: int64(n)})
		}
	})
	eachLine(t, filepath.Join(dir, "metrics.json"), func(line []byte) {
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
		if err != nil {
			t.Fatalf("metrics.json: %v", err)
		}
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			one := pmetric.NewMetrics()
			rm.CopyTo(one.ResourceMetrics().AppendEmpty())
			got.add(rm.Resource(), lensemu.Result{DataPoints: int64(one.DataPointCount())})
		}
	})
	eachLine(t, filepath.Join(dir, "logs.json"), func(line []byte) {
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
		if err != nil {
			t.Fatalf("logs.json: %v", err)
		}
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			n := 0
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				records := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < records.Len(); k++ {
					got.Severities[fmt.Sprintf("%d/%s", rankOf(rl.Resource()), records.At(k).SeverityText())]++
				}
				n += records.Len()
			}
			got.add(rl.Resource(), lensemu.Result{LogRecords: int64(n)})
		}
	})
	return got
}

func eachLine(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open output: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			fn(sc.Bytes())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
}
