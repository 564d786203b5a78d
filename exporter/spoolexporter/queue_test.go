// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/metadatatest"
)

// TestADamagedQueueIsLoggedAndCounted: a slot's queue whose last record
// was damaged on disk while the agent was down. The next agent sends the
// records before it, logs the damaged part at ERROR with its file and
// counts it in otelcol_exporter_spool_queue_items_lost; the slot's bytes
// held go back to 0 once it is sent.
func TestADamagedQueueIsLoggedAndCounted(t *testing.T) {
	gw := startGateway(t)
	refuse(gw)
	cfg := testConfig(t, gw.Addr)
	exp := startSpool(t, cfg)
	for range 3 {
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces("run-a", 5)))
	}
	require.NoError(t, exp.Shutdown(t.Context()))

	slot := SlotName("", spoolOf(t, cfg).slotOf(runTraces("run-a", 0).ResourceSpans().At(0).Resource()))
	segs, err := filepath.Glob(filepath.Join(cfg.Directory, "exporter_spool_"+slot+"_traces.journal", "*.seg"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	data, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff // the third record's last byte
	require.NoError(t, os.WriteFile(segs[0], data, 0o600))

	gw.SetRespond(nil)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is already canceled when Cleanup functions run
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	exp, err = NewFactory().CreateTraces(t.Context(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return spansOf(gw) == 10 }, 10*time.Second, 10*time.Millisecond, "the two records before the damaged one are sent")
	require.NoError(t, exp.Shutdown(t.Context()))
	assert.Equal(t, 10, spansOf(gw))

	id := "spool/" + slot
	metadatatest.AssertEqualExporterSpoolQueueItemsLost(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("exporter", id))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterSpoolQueueBytes(t, tel, []metricdata.DataPoint[int64]{
		{Value: 0, Attributes: attribute.NewSet(attribute.String("exporter", id), attribute.String("data_type", "traces"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	lost := logs.FilterMessageSnippet("could not be read back and is lost").All()
	require.Len(t, lost, 1)
	assert.Equal(t, zapcore.ErrorLevel, lost[0].Level)
	assert.Equal(t, segs[0], lost[0].ContextMap()["file"])
}
