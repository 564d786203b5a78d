package jsonlfileexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadatatest"
)

// testConfig is the default configuration writing to dir, with the queue
// and retries off so that ConsumeX returns the outcome of the write.
func testConfig(dir string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = dir
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

type testExporters struct {
	traces   exporter.Traces
	metrics  exporter.Metrics
	logs     exporter.Logs
	logged   *observer.ObservedLogs
	shutdown func()
}

// startExporters builds and starts the three signal exporters of one
// configuration from one factory, as the collector does. shutdown is
// idempotent and also runs at the end of the test.
func startExporters(t *testing.T, cfg *Config, set exporter.Settings) *testExporters {
	t.Helper()
	require.NoError(t, cfg.Validate())
	core, logged := observer.New(zap.DebugLevel)
	set.Logger = zap.New(core)
	f := NewFactory()
	ctx := context.Background()
	te := &testExporters{logged: logged}
	var err error
	te.traces, err = f.CreateTraces(ctx, set, cfg)
	require.NoError(t, err)
	te.metrics, err = f.CreateMetrics(ctx, set, cfg)
	require.NoError(t, err)
	te.logs, err = f.CreateLogs(ctx, set, cfg)
	require.NoError(t, err)
	for _, c := range []component.Component{te.traces, te.metrics, te.logs} {
		require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	}
	var once sync.Once
	te.shutdown = func() {
		once.Do(func() {
			for _, c := range []component.Component{te.traces, te.metrics, te.logs} {
				assert.NoError(t, c.Shutdown(ctx))
			}
		})
	}
	t.Cleanup(te.shutdown)
	return te
}

func nopSettings() exporter.Settings {
	return exportertest.NewNopSettings(metadata.Type)
}

// readRecords reads a plain, gzip or zstd JSONL file and checks that every
// line is complete, valid UTF-8 and valid JSON.
func readRecords(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	data := raw
	switch {
	case strings.HasSuffix(path, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	case strings.HasSuffix(path, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		defer zr.Close()
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	if len(data) == 0 {
		return nil
	}
	lines := splitLines(t, data)
	for _, l := range lines {
		require.True(t, utf8.Valid(l) && json.Valid(l), "invalid line in %s: %q", path, l)
	}
	return lines
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	return len(readRecords(t, path))
}

func TestWritesOneFilePerSignal(t *testing.T) {
	dir := t.TempDir()
	te := startExporters(t, testConfig(dir), nopSettings())
	ctx := context.Background()
	require.NoError(t, te.traces.ConsumeTraces(ctx, megatronTraces(8, 125)))
	require.NoError(t, te.metrics.ConsumeMetrics(ctx, megatronMetrics(8, 125)))
	require.NoError(t, te.logs.ConsumeLogs(ctx, megatronLogs(8, 125)))
	te.shutdown()

	for _, name := range []string{"traces.jsonl", "metrics.jsonl", "logs.jsonl"} {
		assert.Equal(t, 1000, countLines(t, filepath.Join(dir, name)), name)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "traces.jsonl")) {
		var r spanRecord
		decodeStrict(t, l, &r)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "metrics.jsonl")) {
		var r metricRecord
		decodeStrict(t, l, &r)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "logs.jsonl")) {
		var r logRecord
		decodeStrict(t, l, &r)
	}
}

func runTraces(resources ...map[string]any) ptrace.Traces {
	td := ptrace.NewTraces()
	for i, attrs := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		if err := rs.Resource().Attributes().FromRaw(attrs); err != nil {
			panic(err)
		}
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for j := range 3 {
			s := spans.AppendEmpty()
			s.SetName(fmt.Sprintf("span-%d-%d", i, j))
		}
	}
	return td
}

func TestPathTemplates(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/rank-{nv.dl.rank}.jsonl"
	cfg.MissingAttributeValue = "no-run"
	te := startExporters(t, cfg, nopSettings())
	require.NoError(t, te.traces.ConsumeTraces(context.Background(), runTraces(
		map[string]any{"nemo.run.id": "run-a", "nv.dl.rank": 0},
		map[string]any{"nemo.run.id": "run-a", "nv.dl.rank": "0"}, // the same rank as a string
		map[string]any{"nemo.run.id": "run-b", "nv.dl.rank": 1},
		map[string]any{"nv.dl.rank": 2},                             // no run id
		map[string]any{"nemo.run.id": "", "nv.dl.rank": 3},          // empty run id
		map[string]any{"nemo.run.id": "../../etc", "nv.dl.rank": 4}, // hostile values
		map[string]any{"nemo.run.id": ".", "nv.dl.rank": "a/b\\c\x00\n\xff"},
	)))
	te.shutdown()

	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	}))
	slices.Sort(files)
	assert.Equal(t, []string{
		"_._.._etc/rank-4.jsonl",
		"_/rank-a_b_c___.jsonl",
		"no-run/rank-2.jsonl",
		"no-run/rank-3.jsonl",
		"run-a/rank-0.jsonl",
		"run-b/rank-1.jsonl",
	}, files)
	assert.Equal(t, 6, countLines(t, filepath.Join(dir, "run-a", "rank-0.jsonl")))
	assert.Equal(t, 3, countLines(t, filepath.Join(dir, "run-b", "rank-1.jsonl")))
}

func TestSignalsSharingAPathShareTheFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/all.jsonl"
	cfg.LogsPath = "./{nemo.run.id}//all.jsonl" // the same file, spelled differently
	te := startExporters(t, cfg, nopSettings())
	ctx := context.Background()
	for range 5 {
		require.NoError(t, te.traces.ConsumeTraces(ctx, megatronTraces(2, 50)))
		require.NoError(t, te.logs.ConsumeLogs(ctx, megatronLogs(2, 50)))
	}
	te.shutdown()
	assert.Equal(t, 1000, countLines(t, filepath.Join(dir, "run-8f3a2c", "all.jsonl")))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

func TestFlushInterval(t *testing.T) {
	t.Run("records wait in memory until the interval or shutdown", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = time.Hour
		te := startExporters(t, cfg, nopSettings())
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 10)))
		assert.Zero(t, fileSize(t, filepath.Join(dir, "traces.jsonl")), "nothing written before the flush")
		te.shutdown()
		assert.Equal(t, 10, countLines(t, filepath.Join(dir, "traces.jsonl")), "shutdown writes everything accepted")
	})
	t.Run("the periodic flush writes buffered records", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = 20 * time.Millisecond
		te := startExporters(t, cfg, nopSettings())
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 10)))
		require.Eventually(t, func() bool {
			return fileSize(t, filepath.Join(dir, "traces.jsonl")) > 0
		}, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, 10, countLines(t, filepath.Join(dir, "traces.jsonl")))
	})
	t.Run("zero writes every batch before acknowledging it", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = 0
		te := startExporters(t, cfg, nopSettings())
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 10)))
		assert.Equal(t, 10, countLines(t, filepath.Join(dir, "traces.jsonl")))
	})
	t.Run("a full buffer is written without waiting", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = time.Hour
		te := startExporters(t, cfg, nopSettings())
		// 1,000 Megatron spans are well over flushThreshold.
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(8, 125)))
		assert.Equal(t, 1000, countLines(t, filepath.Join(dir, "traces.jsonl")))
	})
}

func TestAppend(t *testing.T) {
	for _, appendMode := range []bool{true, false} {
		t.Run(fmt.Sprintf("append=%v", appendMode), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.Append = appendMode
			for range 2 {
				te := startExporters(t, cfg, nopSettings())
				require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 10)))
				te.shutdown()
			}
			want := 10
			if appendMode {
				want = 20
			}
			assert.Equal(t, want, countLines(t, filepath.Join(dir, "traces.jsonl")))
		})
	}
}

func TestAppendFalseTruncatesOnlyOnce(t *testing.T) {
	// With a file evicted and reopened in one run, append: false must not
	// truncate it again.
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Append = false
	cfg.MaxOpenFiles = 1
	cfg.TracesPath = "{nemo.run.id}.jsonl"
	te := startExporters(t, cfg, nopSettings())
	ctx := context.Background()
	for range 3 {
		require.NoError(t, te.traces.ConsumeTraces(ctx, runTraces(map[string]any{"nemo.run.id": "a"})))
		require.NoError(t, te.traces.ConsumeTraces(ctx, runTraces(map[string]any{"nemo.run.id": "b"})))
	}
	te.shutdown()
	assert.Equal(t, 9, countLines(t, filepath.Join(dir, "a.jsonl")))
	assert.Equal(t, 9, countLines(t, filepath.Join(dir, "b.jsonl")))
}

func TestFilePermissions(t *testing.T) {
	for _, tc := range []struct {
		perms    string
		wantFile os.FileMode
		wantDir  os.FileMode
	}{
		{"0640", 0o640, 0o750},
		{"0600", 0o600, 0o700},
		{"0644", 0o644, 0o755},
	} {
		t.Run(tc.perms, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "out")
			cfg := testConfig(dir)
			cfg.FilePermissions = tc.perms
			cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
			te := startExporters(t, cfg, nopSettings())
			require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 1)))
			te.shutdown()

			st, err := os.Stat(filepath.Join(dir, "run-8f3a2c", "traces.jsonl"))
			require.NoError(t, err)
			assert.Equal(t, tc.wantFile, st.Mode().Perm())
			for _, d := range []string{dir, filepath.Join(dir, "run-8f3a2c")} {
				st, err = os.Stat(d)
				require.NoError(t, err)
				assert.Equal(t, tc.wantDir, st.Mode().Perm()&^umask(), d)
			}
		})
	}
}

// umask returns the process umask, which directories (unlike files) honour.
func umask() os.FileMode {
	dir, err := os.MkdirTemp("", "umask")
	if err != nil {
		return 0
	}
	defer os.Remove(dir)
	f := filepath.Join(dir, "probe")
	if err := os.Mkdir(f, 0o777); err != nil {
		return 0
	}
	st, err := os.Stat(f)
	if err != nil {
		return 0
	}
	return 0o777 &^ st.Mode().Perm()
}

func TestLRUEvictionLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxOpenFiles = 2
	cfg.FlushInterval = time.Hour // records stay buffered until eviction
	cfg.TracesPath = "{nemo.run.id}.jsonl"
	set := nopSettings()
	te := startExporters(t, cfg, set)
	ctx := context.Background()
	runs := []string{"a", "b", "c", "d", "e"}
	for round := range 4 {
		for _, run := range runs {
			require.NoError(t, te.traces.ConsumeTraces(ctx, runTraces(map[string]any{"nemo.run.id": run})))
		}
		// Every run but the two most recent has been evicted, so its
		// records are in its file already.
		for _, run := range runs[:3] {
			assert.Equal(t, 3*(round+1), countLines(t, filepath.Join(dir, run+".jsonl")), "round %d run %s", round, run)
		}
	}
	te.shutdown()
	for _, run := range runs {
		assert.Equal(t, 12, countLines(t, filepath.Join(dir, run+".jsonl")), run)
	}
}

func TestFileWriterBoundsOpenFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxOpenFiles = 3
	set, err := newFileWriterSettings(cfg)
	require.NoError(t, err)
	w, err := newFileWriter(set, zap.NewNop())
	require.NoError(t, err)
	tel := newTestTelemetry(t)
	for i := range 50 {
		require.NoError(t, w.write(fmt.Sprintf("f%d.jsonl", i%7), "overflow.jsonl", []byte("{}\n"), 1, tel))
		assert.LessOrEqual(t, len(w.files), 3)
		assert.Equal(t, len(w.files), w.lru.Len())
		open := 0
		for _, of := range w.files {
			if of.f != nil {
				open++
			}
		}
		assert.LessOrEqual(t, open, 3)
	}
	require.NoError(t, w.shutdown())
	total := 0
	for i := range 7 {
		total += countLines(t, filepath.Join(dir, fmt.Sprintf("f%d.jsonl", i)))
	}
	assert.Equal(t, 50, total)
}

func newTestTelemetry(t *testing.T) *telemetry {
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return newTelemetry(tb)
}

// rotatedFiles lists the rotated files next to path.
func rotatedFiles(t *testing.T, path string) []string {
	t.Helper()
	prefix, ext := splitBackupName(path)
	matches, err := filepath.Glob(prefix + "-*" + ext)
	require.NoError(t, err)
	return matches
}

func TestRotationBySizeWithTemplates(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	cfg.Rotation.MaxMegabytes = 1
	cfg.FlushInterval = 0
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	ctx := context.Background()
	sent := 0
	for i := range 12 {
		for _, run := range []string{"run-a", "run-b"} {
			td := megatronTraces(1, 250) // ~0.3 MiB
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("nemo.run.id", run)
			spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				spans.At(j).Attributes().PutInt("batch", int64(i))
			}
			require.NoError(t, te.traces.ConsumeTraces(ctx, td))
			sent += 250
		}
	}
	te.shutdown()

	total := 0
	rotations := 0
	for _, run := range []string{"run-a", "run-b"} {
		current := filepath.Join(dir, run, "traces.jsonl")
		backups := rotatedFiles(t, current)
		assert.GreaterOrEqual(t, len(backups), 2, "each run rotates on its own")
		rotations += len(backups)
		for _, p := range append(backups, current) {
			assert.LessOrEqual(t, fileSize(t, p), int64(mib), p)
			total += countLines(t, p)
		}
	}
	assert.Equal(t, sent, total, "rotation loses and duplicates nothing")
	metadatatest.AssertEqualExporterJsonlFileRotations(t, tt,
		[]metricdata.DataPoint[int64]{{Value: int64(rotations)}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: int64(sent)}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestRotationPrunesByCountAndAge(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Rotation = RotationConfig{MaxMegabytes: 1, MaxBackups: 2, MaxDays: 1}
	cfg.FlushInterval = 0
	current := filepath.Join(dir, "traces.jsonl")
	// A rotated file from long ago and a file that only looks like one.
	old := filepath.Join(dir, "traces-2020-01-01T00-00-00.000.jsonl")
	require.NoError(t, os.WriteFile(old, []byte("{}\n"), 0o640))
	unrelated := filepath.Join(dir, "traces-notes.jsonl")
	require.NoError(t, os.WriteFile(unrelated, []byte("keep\n"), 0o640))

	te := startExporters(t, cfg, nopSettings())
	for range 12 {
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 250)))
	}
	te.shutdown()
	backups := rotatedFiles(t, current)
	assert.NotContains(t, backups, old, "older than max_days")
	assert.FileExists(t, unrelated)
	assert.Len(t, slices.DeleteFunc(backups, func(p string) bool { return p == unrelated }), 2, "max_backups")
}

func TestCompression(t *testing.T) {
	for _, tc := range []struct {
		compression, suffix, tool string
	}{
		{compressionGzip, ".gz", "zcat"},
		{compressionZstd, ".zst", "zstdcat"},
	} {
		t.Run(tc.compression, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.Compression = tc.compression
			cfg.FlushInterval = 0
			te := startExporters(t, cfg, nopSettings())
			for range 5 {
				require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(2, 50)))
			}
			te.shutdown()
			// Every batch became one gzip member or zstd frame of one file.
			path := filepath.Join(dir, "traces.jsonl"+tc.suffix)
			lines := readRecords(t, path)
			assert.Len(t, lines, 500)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			var plain int
			for _, l := range lines {
				plain += len(l) + 1
			}
			assert.Less(t, len(raw)*4, plain, "compressed to well under a quarter")

			if bin, err := exec.LookPath(tc.tool); err == nil {
				out, err := exec.Command(bin, path).Output()
				require.NoError(t, err)
				assert.Equal(t, bytes.Join(lines, []byte{'\n'}), bytes.TrimSuffix(out, []byte{'\n'}), "%s reads the file", tc.tool)
			} else {
				t.Logf("%s not installed; checked with the Go decoder only", tc.tool)
			}
		})
	}
}

func TestCrashLeavesReadableCompressedPrefix(t *testing.T) {
	// Every flush is one complete member, so cutting the file anywhere
	// (a crash) leaves the members before the cut readable in full.
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Compression = compressionGzip
	cfg.FlushInterval = 0
	te := startExporters(t, cfg, nopSettings())
	var ends []int64
	path := filepath.Join(dir, "traces.jsonl.gz")
	for range 4 {
		require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 40)))
		ends = append(ends, fileSize(t, path))
	}
	te.shutdown()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for i, end := range ends[:3] {
		cut := raw[:end+(ends[i+1]-end)/2] // halfway through the next member
		zr, err := gzip.NewReader(bytes.NewReader(cut))
		require.NoError(t, err)
		out, err := io.ReadAll(zr)
		require.Error(t, err, "a cut member is reported")
		complete := out[:bytes.LastIndexByte(out, '\n')+1]
		assert.GreaterOrEqual(t, len(splitLines(t, complete)), 40*(i+1))
		for _, l := range splitLines(t, complete) {
			require.True(t, json.Valid(l))
		}
	}
}

func TestReopenRepairsTornTail(t *testing.T) {
	for _, tc := range []struct {
		name, existing, kept string
	}{
		{"cut last line", "{\"a\":1}\n{\"b\":2}\n{\"c\":", "{\"a\":1}\n{\"b\":2}\n"},
		{"cut only line", "{\"c\":", ""},
		{"complete file", "{\"a\":1}\n", "{\"a\":1}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "traces.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.existing), 0o640))
			cfg := testConfig(dir)
			cfg.FlushInterval = 0
			te := startExporters(t, cfg, nopSettings())
			require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 2)))
			te.shutdown()
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.HasPrefix(got, []byte(tc.kept)))
			assert.Len(t, readRecords(t, path), strings.Count(tc.kept, "\n")+2)
		})
	}
}

func TestUnwritablePathIsPermanentAndLogged(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	require.NoError(t, os.WriteFile(blocker, nil, 0o640))
	cfg := testConfig(filepath.Join(blocker, "out")) // a directory below a regular file
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))

	err := te.traces.ConsumeTraces(context.Background(), megatronTraces(1, 5))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "retrying cannot fix %v", err)
	want := filepath.Join(blocker, "out", "traces.jsonl")
	assert.Contains(t, err.Error(), want)
	logged := te.logged.FilterMessage("Dropping records: the file cannot be written").All()
	require.Len(t, logged, 1)
	assert.Equal(t, want, logged[0].ContextMap()["path"])
	metadatatest.AssertEqualExporterJsonlFileErrors(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("operation", "open"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestPartialFailureRetriesOnlyFailedResources(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	cfg.FlushInterval = 0
	// run-bad's file is a directory: opening it fails for good.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "run-bad", "traces.jsonl"), 0o750))
	te := startExporters(t, cfg, nopSettings())
	err := te.traces.ConsumeTraces(context.Background(), runTraces(
		map[string]any{"nemo.run.id": "run-ok"},
		map[string]any{"nemo.run.id": "run-bad"},
	))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Equal(t, 3, countLines(t, filepath.Join(dir, "run-ok", "traces.jsonl")), "the good run is written")
}

func TestRetryableFailureRetriesOnlyFailedResources(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}.jsonl"
	cfg.FlushInterval = time.Hour
	cfg.MaxOpenFiles = 1
	shared, err := newJSONLExporter(cfg, zap.NewNop())
	require.NoError(t, err)
	shared.users = 1
	tmpl, err := parsePathTemplate(cfg.TracesPath)
	require.NoError(t, err)
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	se := &signalExporter{jsonlExporter: shared, tmpl: tmpl, tel: newTelemetry(tb), tb: tb, logger: zap.NewNop()}

	// run-a's file holds buffered records and, from now on, refuses writes
	// (a read-only handle: EBADF, an error worth retrying). With one open
	// file allowed, run-b cannot get a file until run-a's records are out.
	require.NoError(t, shared.writer.write("run-a.jsonl", se.overflow, []byte("{\"early\":1}\n"), 1, se.tel))
	of := shared.writer.files["run-a.jsonl"]
	require.NoError(t, of.f.Close())
	of.f, err = os.Open(filepath.Join(dir, "run-a.jsonl"))
	require.NoError(t, err)

	td := runTraces(map[string]any{"nemo.run.id": "run-a"}, map[string]any{"nemo.run.id": "run-b"})
	err = se.consumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "max_open_files (1)")
	var retry consumererror.Traces
	require.ErrorAs(t, err, &retry)
	require.Equal(t, 1, retry.Data().ResourceSpans().Len(), "only run-b is retried; run-a was accepted")
	run, _ := retry.Data().ResourceSpans().At(0).Resource().Attributes().Get("nemo.run.id")
	assert.Equal(t, "run-b", run.Str())

	// The disk recovers: the retry and the buffered records all arrive once.
	require.NoError(t, of.f.Close())
	of.f = nil
	require.NoError(t, se.consumeTraces(context.Background(), retry.Data()))
	require.NoError(t, se.shutdown(context.Background()))
	assert.Equal(t, 4, countLines(t, filepath.Join(dir, "run-a.jsonl")))
	assert.Equal(t, 3, countLines(t, filepath.Join(dir, "run-b.jsonl")))
}

func TestConcurrentWritersNeverTearLines(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Rotation.MaxMegabytes = 1
	cfg.FlushInterval = 5 * time.Millisecond
	te := startExporters(t, cfg, nopSettings())
	const writers, batches, perBatch = 8, 10, 60
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				td := megatronTraces(1, perBatch)
				spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
				for i := 0; i < spans.Len(); i++ {
					spans.At(i).SetName(fmt.Sprintf("w%d-b%d-s%d", w, b, i))
				}
				assert.NoError(t, te.traces.ConsumeTraces(context.Background(), td))
			}
		})
	}
	wg.Wait()
	te.shutdown()

	current := filepath.Join(dir, "traces.jsonl")
	seen := map[string]bool{}
	for _, p := range append(rotatedFiles(t, current), current) {
		for _, l := range readRecords(t, p) {
			var r spanRecord
			decodeStrict(t, l, &r)
			require.False(t, seen[r.Name], "duplicate %s", r.Name)
			seen[r.Name] = true
		}
	}
	assert.Len(t, seen, writers*batches*perBatch)
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	exp, err := NewFactory().CreateTraces(context.Background(), nopSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestWriteAfterShutdownIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	set, err := newFileWriterSettings(cfg)
	require.NoError(t, err)
	w, err := newFileWriter(set, zap.NewNop())
	require.NoError(t, err)
	w.start()
	require.NoError(t, w.shutdown())
	err = w.write("traces.jsonl", "overflow.jsonl", []byte("{}\n"), 1, newTestTelemetry(t))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
}

func TestTelemetryCountsRecordsAndBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	require.NoError(t, te.traces.ConsumeTraces(context.Background(), megatronTraces(2, 30)))
	te.shutdown()
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: 60}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterJsonlFileBytesWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: fileSize(t, filepath.Join(dir, "traces.jsonl"))}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestPathTemplateParsing(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		render  string
	}{
		{in: "traces.jsonl", render: "traces.jsonl"},
		{in: "./a//b/./traces.jsonl", render: "a/b/traces.jsonl"},
		{in: "{nemo.run.id}/{nv.dl.rank}.jsonl", render: "run-1/3.jsonl"},
		{in: "run-{nemo.run.id}-{missing}.jsonl", render: "run-run-1-unknown.jsonl"},
		{in: "", err: "must not be empty"},
		{in: "a/../../b", err: "must stay inside directory"},
		{in: "..", err: "must stay inside directory"},
		{in: "/abs", err: "must be relative to directory"},
		{in: "dir/", err: "must name a file"},
		{in: ".", err: "must name a file"},
		{in: "{}.jsonl", err: "empty attribute reference"},
		{in: "{a.jsonl", err: "unclosed '{'"},
		{in: "{a{b}}.jsonl", err: "unclosed '{'"},
		{in: "a}.jsonl", err: "unmatched '}'"},
		{in: "{a/b}.jsonl", err: "must not contain '/'"},
		{in: "a\x01.jsonl", err: "control characters"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			tmpl, err := parsePathTemplate(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			attrs := pcommon.NewMap()
			attrs.PutStr("nemo.run.id", "run-1")
			attrs.PutInt("nv.dl.rank", 3)
			assert.Equal(t, tc.render, string(tmpl.render(nil, attrs, "unknown")))
		})
	}
}

func TestPathValueSanitising(t *testing.T) {
	for in, want := range map[string]string{
		"run-1":                  "run-1",
		"..":                     "_.",
		".hidden":                "_hidden",
		"a/b":                    "a_b",
		`a\b`:                    "a_b",
		"tab\there":              "tab_here",
		"nul\x00":                "nul_",
		"bad\xff":                "bad_",
		"日本":                     "日本",
		strings.Repeat("é", 100): strings.Repeat("é", 64),
	} {
		assert.Equal(t, want, string(appendPathValue(nil, in)), "%q", in)
	}
	require.NoError(t, checkPathValue("unknown"))
	require.Error(t, checkPathValue(".."))
	require.Error(t, checkPathValue(""))
}

func TestErrorsAreClassified(t *testing.T) {
	_, err := os.Open(filepath.Join(t.TempDir(), "missing"))
	assert.False(t, consumererror.IsPermanent(classifyFileError(err)))
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err = os.Open(filepath.Join(f, "below"))
	assert.True(t, consumererror.IsPermanent(classifyFileError(err)))
	assert.True(t, errors.Is(classifyFileError(err), err))
}
