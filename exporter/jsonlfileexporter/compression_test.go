// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
			cfg.Compression = Compression(tc.compression)
			cfg.FlushInterval = 0
			te := startExporters(t, cfg, nopSettings())
			for range 5 {
				require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(2, 50)))
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
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 40)))
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
			require.NoError(t, os.WriteFile(path, []byte(tc.existing), 0o600))
			cfg := testConfig(dir)
			cfg.FlushInterval = 0
			te := startExporters(t, cfg, nopSettings())
			require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 2)))
			te.shutdown()
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.HasPrefix(got, []byte(tc.kept)))
			assert.Len(t, readRecords(t, path), strings.Count(tc.kept, "\n")+2)
		})
	}
}
