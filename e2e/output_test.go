package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// telemetry is what a preset wrote to its output directory.
type telemetry struct {
	lensemu.Result
	SpansByRank map[int64]int
}

// readTelemetry parses the file preset's output: one OTLP/JSON export request
// per line in traces.json, metrics.json and logs.json.
func readTelemetry(t *testing.T, dir string) telemetry {
	t.Helper()
	got := telemetry{SpansByRank: map[int64]int{}}
	eachLine(t, filepath.Join(dir, "traces.json"), func(line []byte) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("traces.json: %v", err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			n := 0
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				n += rs.ScopeSpans().At(j).Spans().Len()
			}
			got.Spans += int64(n)
			if rank, _, st := rankattr.Lookup(rs.Resource().Attributes(), rankattr.DefaultRankKeys); st == rankattr.Valid {
				got.SpansByRank[rank] += n
			}
		}
	})
	eachLine(t, filepath.Join(dir, "metrics.json"), func(line []byte) {
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
		if err != nil {
			t.Fatalf("metrics.json: %v", err)
		}
		got.DataPoints += int64(md.DataPointCount())
	})
	eachLine(t, filepath.Join(dir, "logs.json"), func(line []byte) {
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
		if err != nil {
			t.Fatalf("logs.json: %v", err)
		}
		got.LogRecords += int64(ld.LogRecordCount())
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
