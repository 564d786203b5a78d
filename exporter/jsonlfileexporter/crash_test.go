// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
)

// These tests run the exporter in a child process (this test binary again,
// selecting a helper test by environment), so that it can be killed with
// SIGKILL or run under a file size limit without affecting the test run.

const (
	childDirEnv         = "JSONL_FILE_TEST_CHILD_DIR"
	childCompressionEnv = "JSONL_FILE_TEST_CHILD_COMPRESSION"
	childFsizeEnv       = "JSONL_FILE_TEST_CHILD_FSIZE"
)

func childCommand(ctx context.Context, test string, env ...string) *exec.Cmd {
	//nolint:gosec // G204: runs this test binary (os.Args[0]) again, selecting one of its own tests by a constant name
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// TestKill9Child writes span batches until it is killed, printing
// "ACK <spans>" after each batch the exporter acknowledged.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("helper process of TestKill9LeavesOnlyCompleteLines")
	}
	cfg := testConfig(dir)
	cfg.Compression = Compression(os.Getenv(childCompressionEnv))
	cfg.FlushInterval = 0 // acknowledged means written
	te := startExporters(t, cfg, nopSettings())
	acked := 0
	for i := 0; ; i++ {
		// Batches of varying size, so writes end at varying offsets.
		td := megatronTraces(1, 20+i%80)
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), td))
		acked += td.SpanCount()
		fmt.Printf("ACK %d\n", acked)
	}
}

func TestKill9LeavesOnlyCompleteLines(t *testing.T) {
	for _, compression := range []string{compressionNone, compressionGzip, compressionZstd} {
		t.Run(compression, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := childCommand(ctx, "TestKill9Child", childDirEnv+"="+dir, childCompressionEnv+"="+compression)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())

			// Kill the child in the middle of writing, once it has
			// acknowledged a good number of spans.
			acked := 0
			scanner := bufio.NewScanner(stdout)
			for acked < 20000 && scanner.Scan() {
				if n, ok := strings.CutPrefix(scanner.Text(), "ACK "); ok {
					acked, err = strconv.Atoi(n)
					require.NoError(t, err)
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_, _ = io.Copy(io.Discard, stdout)
			err = cmd.Wait()
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr, "the child must have been killed, not have exited: %v", err)
			require.GreaterOrEqual(t, acked, 20000, "the child stopped early")

			path := filepath.Join(dir, "traces.jsonl")
			switch compression {
			case compressionGzip:
				path += ".gz"
			case compressionZstd:
				path += ".zst"
			}
			complete, fragment := readAfterCrash(t, path)
			assert.GreaterOrEqual(t, complete, acked, "every acknowledged span is in the file")
			if fragment > 0 {
				// Only possible when the kill landed inside a write(2) that
				// spans pages; the next open removes it (checked below).
				t.Logf("the kill cut a write: %d bytes of an incomplete last line", fragment)
			}

			// The next run starts cleanly on the same files.
			cfg := testConfig(dir)
			cfg.Compression = Compression(compression)
			te := startExporters(t, cfg, nopSettings())
			require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 10)))
			te.shutdown()
			// The cut last line, member or frame is gone; the new records
			// follow the complete ones in the same file.
			lines := readRecords(t, path) // fails on any incomplete or invalid line
			assert.Len(t, lines, complete+10)
			assert.Empty(t, rotatedFiles(t, path))
		})
	}
}

// readAfterCrash reads a file a killed writer left, returning the number of
// complete lines (each of which must be a valid record) and the length of an
// unterminated fragment after them.
func readAfterCrash(t *testing.T, path string) (complete, fragment int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	data := raw
	switch {
	case strings.HasSuffix(path, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		data, err = io.ReadAll(zr)
		if err != nil {
			// Only a member cut by the kill may be incomplete.
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		}
	case strings.HasSuffix(path, ".zst"):
		// Decode the complete frames only: the decoder would refuse a
		// file that ends in a cut frame as a whole.
		end, err := zstdCompleteEnd(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			require.ErrorIs(t, err, errCut, "only a frame cut by the kill may be incomplete")
		}
		zr, err := zstd.NewReader(bytes.NewReader(raw[:end]))
		require.NoError(t, err)
		defer zr.Close()
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	fragment = len(data) - end
	if end == 0 {
		return 0, fragment
	}
	for l := range bytes.SplitSeq(data[:end-1], []byte{'\n'}) {
		var r spanRecord
		decodeStrict(t, l, &r)
		complete++
	}
	return complete, fragment
}

// TestFileSizeLimitChild writes one batch for two runs under a file size
// limit that run-full's file is about to hit.
func TestFileSizeLimitChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("helper process of TestFailedWriteIsTakenBack")
	}
	limit, err := strconv.ParseUint(os.Getenv(childFsizeEnv), 10, 64)
	require.NoError(t, err)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}))

	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}.jsonl"
	cfg.FlushInterval = 0
	te := startExporters(t, cfg, nopSettings())
	td := megatronTraces(2, 10)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("nemo.run.id", "run-ok")
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("nemo.run.id", "run-full")
	err = te.traces.ConsumeTraces(t.Context(), td)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "a full file or disk is worth retrying")
	assert.ErrorIs(t, err, syscall.EFBIG)
	assert.Contains(t, err.Error(), filepath.Join(dir, "run-full.jsonl"))
	var retry consumererror.Traces
	require.ErrorAs(t, err, &retry)
	require.Equal(t, 1, retry.Data().ResourceSpans().Len())
	run, _ := retry.Data().ResourceSpans().At(0).Resource().Attributes().Get("nemo.run.id")
	assert.Equal(t, "run-full", run.Str())
}

// TestFailedWriteIsTakenBack checks, with a real short write (the kernel
// writes up to the file size limit, then fails with EFBIG), that the part
// written is removed: the file ends with its last complete line.
func TestFailedWriteIsTakenBack(t *testing.T) {
	dir := t.TempDir()
	const limit = 64 << 10
	// run-full's file is 200 bytes short of the limit, in complete lines.
	var prefill []byte
	for len(prefill) < limit-200-40 {
		prefill = fmt.Appendf(prefill, "{\"filler\":%q}\n", strings.Repeat("x", 20))
	}
	full := filepath.Join(dir, "run-full.jsonl")
	require.NoError(t, os.WriteFile(full, prefill, 0o600))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := childCommand(ctx, "TestFileSizeLimitChild", childDirEnv+"="+dir, childFsizeEnv+"="+strconv.Itoa(limit))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child failed:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestFileSizeLimitChild", "child did not run:\n%s", out)

	got, err := os.ReadFile(full)
	require.NoError(t, err)
	assert.Equal(t, prefill, got, "the partial write was taken back")
	lines := readRecords(t, filepath.Join(dir, "run-ok.jsonl"))
	assert.Len(t, lines, 10)
	decodeLines[spanRecord](t, lines)
}
