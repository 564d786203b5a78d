// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compressedFile builds a file of frames (zstd) or members (gzip), one per
// payload, with the exporter's own compressor, and returns it with the
// offsets where each frame ends.
func compressedFile(t *testing.T, codec string, payloads ...string) ([]byte, []int64) {
	t.Helper()
	w, err := newFileWriter(fileWriterSettings{compression: codec}, nil)
	require.NoError(t, err)
	var file bytes.Buffer
	var ends []int64
	for _, p := range payloads {
		w.comp.Reset(&file)
		_, err := w.comp.Write([]byte(p))
		require.NoError(t, err)
		require.NoError(t, w.comp.Close())
		ends = append(ends, int64(file.Len()))
	}
	return file.Bytes(), ends
}

// completeEnd runs the codec's walk over raw.
func completeEnd(t *testing.T, codec string, raw []byte) (int64, error) {
	t.Helper()
	if codec == compressionZstd {
		return zstdCompleteEnd(bytes.NewReader(raw), int64(len(raw)))
	}
	path := filepath.Join(t.TempDir(), "f.jsonl.gz")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return gzipCompleteEnd(f)
}

// TestCompleteEndAtEveryCut cuts a file of three frames (members) at every
// offset, as a kill in the middle of a write would: the walk finds the end
// of the last complete one, and says the rest is cut, not foreign.
func TestCompleteEndAtEveryCut(t *testing.T) {
	for _, codec := range []string{compressionZstd, compressionGzip} {
		t.Run(codec, func(t *testing.T) {
			raw, ends := compressedFile(t, codec,
				"{\"a\":1}\n", string(bytes.Repeat([]byte("{\"b\":2}\n"), 5000)), "{\"c\":3}\n")
			for cut := int64(0); cut <= int64(len(raw)); cut++ {
				want := int64(0)
				for _, e := range ends {
					if e <= cut {
						want = e
					}
				}
				got, err := completeEnd(t, codec, raw[:cut])
				require.Equal(t, want, got, "cut at %d", cut)
				if want == cut {
					require.NoError(t, err, "cut at a frame boundary %d", cut)
				} else {
					require.ErrorIs(t, err, errCut, "cut at %d", cut)
				}
			}
		})
	}
}

func TestCompleteEndOfForeignData(t *testing.T) {
	for _, codec := range []string{compressionZstd, compressionGzip} {
		t.Run(codec, func(t *testing.T) {
			end, err := completeEnd(t, codec, []byte("{\"plain\":\"json\"}\n"))
			assert.ErrorIs(t, err, errForeign)
			assert.Zero(t, end)

			raw, ends := compressedFile(t, codec, "{\"a\":1}\n")
			end, err = completeEnd(t, codec, append(raw, []byte("not compressed at all\n")...))
			assert.ErrorIs(t, err, errForeign)
			assert.Equal(t, ends[0], end)
		})
	}
}

// TestZstdCompleteEndOfOtherEncoders walks frames the zstd command line tool
// writes (single-segment frames with a content size, checksums, levels,
// and a skippable frame), not only the exporter's own.
func TestZstdCompleteEndOfOtherEncoders(t *testing.T) {
	var raw []byte
	for _, args := range [][]string{{"-1"}, {"-19", "--no-check"}, {"-3", "--no-content-size"}} {
		bin, err := exec.LookPath("zstd")
		if err != nil {
			// The Go encoder with other options then.
			enc, encErr := zstd.NewWriter(nil, zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true))
			require.NoError(t, encErr)
			raw = enc.EncodeAll([]byte("{\"x\":1}\n"), raw)
			continue
		}
		cmd := exec.Command(bin, append(args, "-c")...)
		cmd.Stdin = bytes.NewReader(bytes.Repeat([]byte("{\"x\":1}\n"), 1000))
		out, err := cmd.Output()
		require.NoError(t, err)
		raw = append(raw, out...)
	}
	// A skippable frame: magic, length 3, 3 bytes.
	raw = append(raw, 0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'a', 'b', 'c')
	end, err := zstdCompleteEnd(bytes.NewReader(raw), int64(len(raw)))
	require.NoError(t, err)
	assert.Equal(t, int64(len(raw)), end)
	end, err = zstdCompleteEnd(bytes.NewReader(raw[:len(raw)-1]), int64(len(raw)-1))
	assert.ErrorIs(t, err, errCut)
	assert.Less(t, end, int64(len(raw)))
}

// TestReopenRemovesCutCompressedTail: a file an earlier run left with a cut
// last frame (member) is repaired and appended to, keeping every complete
// record; a compressed file that holds something else is moved aside whole.
func TestReopenRemovesCutCompressedTail(t *testing.T) {
	for _, codec := range []string{compressionZstd, compressionGzip} {
		t.Run(codec, func(t *testing.T) {
			raw, ends := compressedFile(t, codec, "{\"earlier\":1}\n", "{\"earlier\":2}\n{\"cut\":")
			path, te := writeAfterEarlierRun(t, codec, raw[:ends[1]-4])
			lines := readRecords(t, path)
			require.Len(t, lines, 11)
			assert.JSONEq(t, `{"earlier":1}`, string(lines[0]))
			assert.Empty(t, rotatedFiles(t, path))
			assert.Equal(t, 1, te.logged.FilterMessage("Removed a cut last compressed block left by an interrupted write").Len())
		})
		t.Run(codec+"/foreign", func(t *testing.T) {
			foreign := []byte("{\"not\":\"compressed\"}\n")
			path, _ := writeAfterEarlierRun(t, codec, foreign)
			assert.Len(t, readRecords(t, path), 10)
			backups := rotatedFiles(t, path)
			require.Len(t, backups, 1)
			moved, err := os.ReadFile(backups[0])
			require.NoError(t, err)
			assert.Equal(t, foreign, moved, "the earlier file is kept as it was")
		})
	}
}

// writeAfterEarlierRun leaves earlier as the traces file of an earlier run,
// then writes 10 spans with compression codec and shuts the exporter down.
func writeAfterEarlierRun(t *testing.T, codec string, earlier []byte) (string, *testExporters) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "traces.jsonl"+compressionSuffix[codec])
	require.NoError(t, os.WriteFile(path, earlier, 0o600))
	cfg := testConfig(dir)
	cfg.Compression = Compression(codec)
	cfg.FlushInterval = 0
	te := startExporters(t, cfg, nopSettings())
	require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
	te.shutdown()
	return path, te
}

// TestStartRepairsFilesOfEveryCodec: at start the exporter repairs the
// files it will not write to again, whatever compression they were written
// with, and leaves rotated files alone.
func TestStartRepairsFilesOfEveryCodec(t *testing.T) {
	dir := t.TempDir()
	zst, zends := compressedFile(t, compressionZstd, "{\"z\":1}\n", "{\"z\":2}\n")
	gz, gends := compressedFile(t, compressionGzip, "{\"g\":1}\n", "{\"g\":2}\n")
	files := map[string][]byte{
		"old-run/traces.jsonl.zst": zst[:zends[1]-3],
		"old-run/logs.jsonl.gz":    gz[:gends[1]-3],
		"old-run/metrics.jsonl":    []byte("{\"m\":1}\n{\"m\":"),
		// Rotated: never repaired (a rotation follows a complete write).
		"old-run/traces-2026-01-01T00-00-00.000.jsonl.zst": zst[:zends[1]-3],
	}
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	cfg := testConfig(dir)
	cfg.Compression = compressionZstd
	te := startExporters(t, cfg, nopSettings())
	te.shutdown()
	assert.Len(t, readRecords(t, filepath.Join(dir, "old-run/traces.jsonl.zst")), 1)
	assert.Len(t, readRecords(t, filepath.Join(dir, "old-run/logs.jsonl.gz")), 1)
	assert.Len(t, readRecords(t, filepath.Join(dir, "old-run/metrics.jsonl")), 1)
	rotated, err := os.ReadFile(filepath.Join(dir, "old-run/traces-2026-01-01T00-00-00.000.jsonl.zst"))
	require.NoError(t, err)
	assert.Equal(t, zst[:zends[1]-3], rotated)
}

func TestIsBackupName(t *testing.T) {
	for path, want := range map[string]bool{
		"/d/traces.jsonl":                             false,
		"/d/traces.jsonl.zst":                         false,
		"/d/traces-2026-01-01T00-00-00.000.jsonl":     true,
		"/d/traces-2026-01-01T00-00-00.000.jsonl.zst": true,
		"/d/run-2026-01-01T00-00-00.000/traces.jsonl": false,
		"/d/traces_2026-01-01T00-00-00.000.jsonl.gz":  false,
		"/d/x-2026-13-01T00-00-00.000.jsonl":          false,
	} {
		assert.Equal(t, want, isBackupName(path), path)
	}
}

// TestSharedDirectoryNeverCutsALiveWritersFile: two collectors writing
// under one directory (filelock_unix.go). The second one's start-up repair
// leaves alone a file the first has open, even when it ends in the middle
// of a line (the first one's write in progress, or a record it just
// acknowledged when the second read the size); once the first has closed
// it, the next start repairs it.
func TestSharedDirectoryNeverCutsALiveWritersFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Compression = Compression(compressionNone)
	cfg.FlushInterval = 0
	first := startExporters(t, cfg, nopSettings())
	require.NoError(t, first.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
	path := filepath.Join(dir, "traces.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"in_flight":`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	second := startExporters(t, cfg, nopSettings())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the second collector cut a file the first one has open")
	assert.Equal(t, 1, second.logged.FilterMessage("Not checking the end of a file another collector is writing").Len())
	second.shutdown()
	first.shutdown()

	third := startExporters(t, cfg, nopSettings())
	third.shutdown()
	assert.Len(t, readRecords(t, path), 10, "once nobody has it open, the cut line is removed")
}
