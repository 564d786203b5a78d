// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestPathTemplates(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/rank-{nv.dl.rank}.jsonl"
	cfg.MissingAttributeValue = "no-run"
	te := startExporters(t, cfg, nopSettings())
	require.NoError(t, te.traces.ConsumeTraces(t.Context(), runTraces(
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
	ctx := t.Context()
	for range 5 {
		require.NoError(t, te.traces.ConsumeTraces(ctx, megatronTraces(2, 50)))
		require.NoError(t, te.logs.ConsumeLogs(ctx, megatronLogs(2, 50)))
	}
	te.shutdown()
	assert.Equal(t, 1000, countLines(t, filepath.Join(dir, "run-8f3a2c", "all.jsonl")))
}

func TestPathTemplateParsing(t *testing.T) {
	for _, tc := range []struct {
		in     string
		err    error
		render string
	}{
		{in: "traces.jsonl", render: "traces.jsonl"},
		{in: "./a//b/./traces.jsonl", render: "a/b/traces.jsonl"},
		{in: "{nemo.run.id}/{nv.dl.rank}.jsonl", render: "run-1/3.jsonl"},
		{in: "run-{nemo.run.id}-{missing}.jsonl", render: "run-run-1-unknown.jsonl"},
		{in: "", err: errEmptyPath},
		{in: "a/../../b", err: errEscapingPath},
		{in: "..", err: errEscapingPath},
		{in: "/abs", err: errAbsolutePath},
		{in: "dir/", err: errNotAFile},
		{in: ".", err: errNotAFile},
		{in: "{}.jsonl", err: errEmptyReference},
		{in: "{a.jsonl", err: errUnclosedBrace},
		{in: "{a{b}}.jsonl", err: errUnclosedBrace},
		{in: "a}.jsonl", err: errUnmatchedBrace},
		{in: "{a/b}.jsonl", err: errSlashInReference},
		{in: "a\x01.jsonl", err: errControlInPath},
	} {
		t.Run(tc.in, func(t *testing.T) {
			tmpl, err := parsePathTemplate(tc.in)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
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

func TestPathValueChecked(t *testing.T) {
	require.NoError(t, checkPathValue("unknown"))
	require.Error(t, checkPathValue(".."))
	require.Error(t, checkPathValue(""))
}
