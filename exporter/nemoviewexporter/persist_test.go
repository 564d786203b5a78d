// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// mapClient is a storage.Client in memory, for the persister's unit tests
// (e2e/viewrestart_test.go restarts the collector on a real file_storage).
type mapClient map[string][]byte

func (m mapClient) Get(_ context.Context, key string) ([]byte, error) { return m[key], nil }
func (m mapClient) Set(_ context.Context, key string, v []byte) error {
	m[key] = v
	return nil
}

func (m mapClient) Delete(_ context.Context, key string) error {
	delete(m, key)
	return nil
}

func (m mapClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = m[op.Key]
		case storage.Set:
			_ = m.Set(ctx, op.Key, op.Value)
		case storage.Delete:
			_ = m.Delete(ctx, op.Key)
		}
	}
	return nil
}

func (mapClient) Close(context.Context) error { return nil }

// TestRunsSurviveARestart: nemo_steps' own outputs (its golden stall
// case with a pipeline stage and its goodput case, metrics and records)
// make two runs; saved and read back into a new store, both pages are the
// same, every field of the JSON, and so is /hosts; a run the store evicted is deleted at
// the next save, and only runs that changed are written again.
func TestRunsSurviveARestart(t *testing.T) {
	s := testStore(10, 100, 10)
	for _, dir := range []string{goldenGoodput, filepath.Join(goldenGoodput, "..", "stall_pipeline_stage")} {
		md, err := golden.ReadMetrics(filepath.Join(dir, "expected.yaml"))
		require.NoError(t, err)
		s.addMetrics(md)
		ld, err := golden.ReadLogs(filepath.Join(dir, "expected_logs.yaml"))
		require.NoError(t, err)
		s.addLogs(ld)
	}
	require.Len(t, s.summaries(), 2)

	client := mapClient{}
	p := &persister{client: client, saved: map[string]time.Time{}}
	require.NoError(t, p.save(t.Context(), s))
	written := len(client)
	require.Equal(t, 4, written, "the list, the hosts and two runs")

	again := testStore(10, 100, 10)
	n, err := (&persister{client: client, saved: map[string]time.Time{}}).load(t.Context(), again)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	var iterations, stalls int
	for _, sum := range s.summaries() {
		want, _ := s.detail(sum.Key)
		iterations += len(want.Iterations)
		stalls += len(want.Stalls)
		got, ok := again.detail(sum.Key)
		require.True(t, ok, sum.Key)
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		assert.JSONEq(t, string(wj), string(gj), sum.Key)
	}
	assert.Equal(t, s.hosts(), again.hosts(), "the fleet's hosts")
	assert.NotEmpty(t, s.hosts().Hosts)
	assert.Positive(t, iterations, "the heatmaps were compared")
	assert.Positive(t, stalls, "the stalls were compared")

	// Unchanged runs are not written again; an evicted one is deleted.
	client[runPrefix+"golden-goodput"] = []byte("untouched")
	require.NoError(t, p.save(t.Context(), s))
	assert.Equal(t, []byte("untouched"), client[runPrefix+"golden-goodput"])
	s.mu.Lock()
	delete(s.runs, "golden-goodput")
	s.mu.Unlock()
	require.NoError(t, p.save(t.Context(), s))
	assert.NotContains(t, client, runPrefix+"golden-goodput")
	assert.Contains(t, client, runPrefix+"golden-pp")
}

// TestSavedRunsOfAnotherLayoutAreNotRead: a saved list of another layout
// is refused with an error naming both layouts; the store stays empty.
func TestSavedRunsOfAnotherLayoutAreNotRead(t *testing.T) {
	client := mapClient{}
	p := &persister{client: client, saved: map[string]time.Time{}}
	s := testStore(10, 100, 10)
	require.NoError(t, p.save(t.Context(), s)) // nothing to save: nothing written
	assert.Empty(t, client)
	var buf bytes.Buffer
	require.NoError(t, gob.NewEncoder(&buf).Encode(savedIndex{Version: savedVersion + 1, Keys: []string{"x"}}))
	client[indexKey] = buf.Bytes()
	_, err := p.load(t.Context(), s)
	require.ErrorContains(t, err, "layout 2, this collector reads layout 1")
	assert.Empty(t, s.summaries())
}
