// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

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
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
		assert.Zero(t, fileSize(t, filepath.Join(dir, "traces.jsonl")), "nothing written before the flush")
		te.shutdown()
		assert.Equal(t, 10, countLines(t, filepath.Join(dir, "traces.jsonl")), "shutdown writes everything accepted")
	})
	t.Run("the periodic flush writes buffered records", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = 20 * time.Millisecond
		te := startExporters(t, cfg, nopSettings())
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
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
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
		assert.Equal(t, 10, countLines(t, filepath.Join(dir, "traces.jsonl")))
	})
	t.Run("a full buffer is written without waiting", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.FlushInterval = time.Hour
		te := startExporters(t, cfg, nopSettings())
		// 1,000 Megatron spans are well over flushThreshold.
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(8, 125)))
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
				require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
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
	ctx := t.Context()
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
			require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 1)))
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

// umask returns the process umask, which directories (unlike files) honor.
func umask() os.FileMode {
	dir, err := os.MkdirTemp("", "umask")
	if err != nil {
		return 0
	}
	defer os.Remove(dir)
	f := filepath.Join(dir, "probe")
	if err = os.Mkdir(f, 0o777); err != nil {
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
	ctx := t.Context()
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
				assert.NoError(t, te.traces.ConsumeTraces(t.Context(), td))
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
