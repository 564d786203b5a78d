// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/memstorage"
)

// tracesOfSizes is a batch with one resource per entry, of that many spans.
func tracesOfSizes(sizes ...int) ptrace.Traces {
	td := ptrace.NewTraces()
	for i, n := range sizes {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("resource", int64(i))
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for range n {
			spans.AppendEmpty().SetName("s")
		}
	}
	return td
}

type tracesRequest = resourcesRequest[ptrace.Traces, ptrace.ResourceSpans]

func itemsOf(t *testing.T, reqs []xexporterhelper.Request) []int {
	t.Helper()
	var out []int
	for _, r := range reqs {
		out = append(out, r.ItemsCount())
		assert.Equal(t, r.(*tracesRequest).sig.data(r.(*tracesRequest).resources).SpanCount(), r.ItemsCount())
	}
	return out
}

func TestMergeSplitCutsBetweenResources(t *testing.T) {
	a, b := tracesOfSizes(4, 4), tracesOfSizes(5, 12, 3)
	wantA, wantB := ptrace.NewTraces(), ptrace.NewTraces()
	a.CopyTo(wantA)
	b.CopyTo(wantB)

	r := tracesSignal.newRequest(a)
	reqs, err := r.MergeSplit(t.Context(), 10, exporterhelper.RequestSizerTypeItems, tracesSignal.newRequest(b))
	require.NoError(t, err)
	// 4+4 fill the first; 5 and 12 cannot share; 12 is over max_size and
	// goes alone, whole; 3 is left for the next merge.
	assert.Equal(t, []int{8, 5, 12, 3}, itemsOf(t, reqs))

	// The last part takes a later merge without touching the parts before.
	more, err := reqs[3].MergeSplit(t.Context(), 10, exporterhelper.RequestSizerTypeItems, tracesSignal.newRequest(tracesOfSizes(2)))
	require.NoError(t, err)
	assert.Equal(t, []int{5}, itemsOf(t, more))
	assert.Equal(t, []int{8, 5, 12}, itemsOf(t, reqs[:3]))

	// Nothing was moved out of the batches the requests were made from.
	require.NoError(t, ptracetest.CompareTraces(wantA, a))
	require.NoError(t, ptracetest.CompareTraces(wantB, b))
}

func TestMergeSplitWithoutLimitMerges(t *testing.T) {
	r := tracesSignal.newRequest(tracesOfSizes(4))
	reqs, err := r.MergeSplit(t.Context(), 0, exporterhelper.RequestSizerTypeItems, tracesSignal.newRequest(tracesOfSizes(40, 2)))
	require.NoError(t, err)
	assert.Equal(t, []int{46}, itemsOf(t, reqs))
}

func TestMergeSplitByBytes(t *testing.T) {
	td := tracesOfSizes(3, 3, 3, 3)
	one := (&ptrace.ProtoMarshaler{}).ResourceSpansSize(td.ResourceSpans().At(0))
	r := tracesSignal.newRequest(td)
	assert.Equal(t, 4*one, r.BytesSize())
	reqs, err := r.MergeSplit(t.Context(), 2*one, exporterhelper.RequestSizerTypeBytes, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{6, 6}, itemsOf(t, reqs))
	for _, q := range reqs {
		assert.LessOrEqual(t, q.BytesSize(), 2*one)
	}
}

func TestMergeSplitRefusesOtherRequestsAndSizers(t *testing.T) {
	r := tracesSignal.newRequest(tracesOfSizes(1))
	_, err := r.MergeSplit(t.Context(), 10, exporterhelper.RequestSizerTypeRequests, nil)
	require.ErrorContains(t, err, "by items or bytes")
	_, err = r.MergeSplit(t.Context(), 10, exporterhelper.RequestSizerTypeItems, logsSignal.newRequest(plog.NewLogs()))
	require.ErrorContains(t, err, "cannot merge")
}

// TestExportersDoNotChangeTheirInput: with the presets' group commit, the
// exporters declare that they do not mutate (so the collector copies
// nothing for them), and it is true: the batches are read-only (pdata
// panics on any change to them) and come out of concurrent merged writes
// as they went in.
func TestExportersDoNotChangeTheirInput(t *testing.T) {
	dir := t.TempDir()
	te := startExporters(t, durableConfig(dir, 40, 50*time.Millisecond), nopSettings())
	assert.False(t, te.traces.Capabilities().MutatesData)
	assert.False(t, te.metrics.Capabilities().MutatesData)
	assert.False(t, te.logs.Capabilities().MutatesData)

	td := megatronTraces(4, 5)
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("l")
	wantT, wantM, wantL := ptrace.NewTraces(), pmetric.NewMetrics(), plog.NewLogs()
	td.CopyTo(wantT)
	md.CopyTo(wantM)
	ld.CopyTo(wantL)
	td.MarkReadOnly()
	md.MarkReadOnly()
	ld.MarkReadOnly()

	const senders = 4
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			assert.NoError(t, te.traces.ConsumeTraces(t.Context(), td))
			assert.NoError(t, te.metrics.ConsumeMetrics(t.Context(), md))
			assert.NoError(t, te.logs.ConsumeLogs(t.Context(), ld))
		})
	}
	wg.Wait()
	require.NoError(t, ptracetest.CompareTraces(wantT, td))
	require.NoError(t, pmetrictest.CompareMetrics(wantM, md))
	require.NoError(t, plogtest.CompareLogs(wantL, ld))
	assert.Equal(t, senders*td.SpanCount(), countLines(t, filepath.Join(dir, "traces.jsonl")))
	assert.Equal(t, senders, countLines(t, filepath.Join(dir, "metrics.jsonl")))
	assert.Equal(t, senders, countLines(t, filepath.Join(dir, "logs.jsonl")))
}

// TestPersistentQueueEncoding: a request survives a persistent queue with
// its resources and its context, and a queue of plain OTLP reads back.
func TestPersistentQueueEncoding(t *testing.T) {
	enc := tracesSignal.queueBatchSettings().Encoding
	td := tracesOfSizes(2, 3)
	r := tracesSignal.newRequest(td)
	merged, err := r.MergeSplit(t.Context(), 0, exporterhelper.RequestSizerTypeItems, tracesSignal.newRequest(tracesOfSizes(1)))
	require.NoError(t, err)
	ctx := client.NewContext(t.Context(), client.Info{Metadata: client.NewMetadata(map[string][]string{"tenant": {"a"}})})

	b, err := enc.Marshal(ctx, merged[0])
	require.NoError(t, err)
	gotCtx, got, err := enc.Unmarshal(b)
	require.NoError(t, err)
	want := tracesOfSizes(2, 3, 1)
	want.ResourceSpans().At(2).Resource().Attributes().PutInt("resource", 0)
	require.NoError(t, ptracetest.CompareTraces(want, tracesSignal.data(got.(*tracesRequest).resources)))
	assert.Equal(t, 6, got.ItemsCount())
	assert.Equal(t, []string{"a"}, client.FromContext(gotCtx).Metadata.Get("tenant"))

	plain, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	_, got, err = enc.Unmarshal(plain)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(td, tracesSignal.data(got.(*tracesRequest).resources)))

	_, _, err = enc.Unmarshal([]byte("not a request"))
	require.Error(t, err)
}

// TestPersistentQueueDeliversOldAndNewItems: with sending_queue::storage,
// an item an earlier version left in the queue (plain OTLP) and a request
// sent now both reach the file.
func TestPersistentQueueDeliversOldAndNewItems(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.FlushInterval = 0
	q := exporterhelper.NewDefaultQueueConfig()
	storageID := component.MustNewID("memstorage")
	q.StorageID = &storageID
	q.Batch = configoptional.Some(exporterhelper.BatchConfig{FlushTimeout: 10 * time.Millisecond, Sizer: exporterhelper.RequestSizerTypeItems, MinSize: 100})
	cfg.QueueConfig = configoptional.Some(q)
	store := memstorage.New()
	old, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(tracesOfSizes(2))
	require.NoError(t, err)
	store.LegacyQueue(old)

	exp, err := NewFactory().CreateTraces(t.Context(), nopSettings(), cfg)
	require.NoError(t, err)
	host := memstorage.Host{Host: componenttest.NewNopHost(), Extensions: map[component.ID]component.Component{storageID: store}}
	require.NoError(t, exp.Start(t.Context(), host))
	require.NoError(t, exp.ConsumeTraces(t.Context(), tracesOfSizes(3, 1)))
	// A persistent queue keeps at shutdown what it has not sent (for the
	// next start): wait for both items to be written first.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "traces.jsonl"))
		return err == nil && bytes.Count(b, []byte("\n")) == 6
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, exp.Shutdown(t.Context()))
}
