// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

func resource(td ptrace.Traces, run string, spans int) {
	rs := td.ResourceSpans().AppendEmpty()
	if run != "" {
		rs.Resource().Attributes().PutStr("nemo.run.id", run)
	}
	for range spans {
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
	}
}

func readLines(t *testing.T, path string) []ptrace.Traces {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []ptrace.Traces
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		require.NoError(t, err)
		out = append(out, td)
	}
	return out
}

func TestWriteSplitsByRunAndSaysWhy(t *testing.T) {
	cfg := NewDefaultConfig()
	cfg.Directory = t.TempDir()
	counted := map[Reason]int{}
	w := NewWriter(cfg, "nemo_otlp/honeycomb", zap.NewNop(), func(r Reason, n int) { counted[r] += n })

	td := ptrace.NewTraces()
	resource(td, "run-a", 2)
	resource(td, "../escape", 1)
	resource(td, "", 3)
	resource(td, "run-a", 1)
	require.NoError(t, Write(w, Traces, td, Refused, "HTTP 401: invalid key"))
	require.NoError(t, Write(w, Traces, td, RetryWindow, "still failing"))
	assert.Equal(t, map[Reason]int{Refused: 7, RetryWindow: 7}, counted)

	for run, spans := range map[string]int{"run-a": 3, "_._escape": 1, "unknown": 3} {
		path := filepath.Join(cfg.Directory, run, "dead-letters", "nemo_otlp_honeycomb", "traces.jsonl")
		assert.Equal(t, path, filepath.Join(Dir(cfg.Directory, map[string]string{"_._escape": "../escape", "unknown": "unknown", "run-a": "run-a"}[run], "nemo_otlp/honeycomb"), "traces.jsonl"))
		lines := readLines(t, path)
		require.Len(t, lines, 2, run)
		assert.Equal(t, spans, lines[0].SpanCount(), run)
		attrs := lines[1].ResourceSpans().At(0).Resource().Attributes()
		reason, _ := attrs.Get(AttrReason)
		detail, _ := attrs.Get(AttrError)
		_, hasTime := attrs.Get(AttrTime)
		assert.Equal(t, "retry_window", reason.Str())
		assert.Equal(t, "still failing", detail.Str())
		assert.True(t, hasTime)
	}
	assert.Equal(t, 1, td.ResourceSpans().At(0).Resource().Attributes().Len(), "the request itself is not changed")
}

func TestConfigMistakesNameTheKey(t *testing.T) {
	require.ErrorContains(t, NewDefaultConfig().Validate(), "directory is required")
	c := Config{Directory: "x", MissingRun: "../up"}
	err := c.Validate()
	require.ErrorContains(t, err, "run_attribute must not be empty")
	require.ErrorContains(t, err, `missing_run: "../up" must be a plain file name`)
}

func TestListFindsARunsLetters(t *testing.T) {
	cfg := NewDefaultConfig()
	cfg.Directory = t.TempDir()
	assert.Nil(t, List(cfg.Directory, "run-a", 10), "no letters: no directory")
	w := NewWriter(cfg, "nemo_otlp/honeycomb", zap.NewNop(), func(Reason, int) {})
	td := ptrace.NewTraces()
	resource(td, "run-a", 2)
	require.NoError(t, Write(w, Traces, td, Refused, "HTTP 403"))
	require.NoError(t, Write(NewWriter(cfg, "spool", zap.NewNop(), func(Reason, int) {}), Traces, td, Refused, "gRPC Unauthenticated"))
	files := List(cfg.Directory, "run-a", 10)
	require.Len(t, files, 2)
	assert.Equal(t, "nemo_otlp_honeycomb", files[0].Destination)
	assert.Equal(t, "traces", files[0].Signal)
	assert.Positive(t, files[0].Bytes)
	assert.Equal(t, "spool", files[1].Destination)
	assert.Len(t, List(cfg.Directory, "run-a", 1), 1, "at most limit")
	assert.Nil(t, List(cfg.Directory, "run-b", 10))
}
