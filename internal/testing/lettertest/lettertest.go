// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package lettertest reads dead letters back in tests: the exporters that
// write them check what they wrote, line by line, as the stock otlpjsonfile
// receiver reads it.
package lettertest // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// Traces reads one run's trace letters for destination under directory:
// one OTLP JSON request per line, and their spans (none: nil, 0).
func Traces(t *testing.T, directory, run, destination string) (lines []ptrace.Traces, spans int) {
	t.Helper()
	f, err := os.Open(filepath.Join(deadletter.Dir(directory, run, destination), "traces.jsonl"))
	if os.IsNotExist(err) {
		return nil, 0
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		// The stock otlpjsonfile receiver's decoder.
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		require.NoError(t, err)
		lines = append(lines, td)
		spans += td.SpanCount()
	}
	require.NoError(t, sc.Err())
	return lines, spans
}

// Reason is a letter's nemo.dead_letter.reason (of its first resource).
func Reason(td ptrace.Traces) string { return attr(td, deadletter.AttrReason) }

// Error is a letter's nemo.dead_letter.error (of its first resource).
func Error(td ptrace.Traces) string { return attr(td, deadletter.AttrError) }

func attr(td ptrace.Traces, key string) string {
	v, _ := td.ResourceSpans().At(0).Resource().Attributes().Get(key)
	return v.Str()
}
