// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/memstorage"
)

// An item of the persistent queue that cannot be read (here: bytes that
// are no request, as a damaged queue file holds) is deleted by
// exporterhelper with a DEBUG line and nothing else; nemo_otlp logs it at
// ERROR and counts it, and delivers the readable items around it.
func TestAnUnreadableQueueItemIsLoggedAndCounted(t *testing.T) {
	sink := startSink(t, protocolHTTPProtobuf)
	c := testConfig(t, protocolHTTPProtobuf, sink)
	storageID := component.MustNewID("memstorage")
	c.QueueConfig.Get().StorageID = &storageID
	store := memstorage.New()
	store.LegacyQueue([]byte("not a request: a damaged queue file"))

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is already canceled when Cleanup functions run
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateTraces(t.Context(), set, c)
	require.NoError(t, err)
	host := memstorage.Host{Host: componenttest.NewNopHost(), Extensions: map[component.ID]component.Component{storageID: store}}
	require.NoError(t, exp.Start(t.Context(), host))
	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(2, "run-a")))

	require.Eventually(t, func() bool { return sink.Count("traces") == 2 }, 10*time.Second, 10*time.Millisecond, "the readable item after it is delivered")
	require.NoError(t, exp.Shutdown(t.Context()))
	metadatatest.AssertEqualExporterNemoOtlpQueueItemsLost(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("exporter", "nemo_otlp"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	lost := logs.FilterMessageSnippet("could not be read and is lost").All()
	require.Len(t, lost, 1)
	assert.Equal(t, zapcore.ErrorLevel, lost[0].Level)
}
