// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/spantest"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// lensVectors are the reference decisions computed by NeMo Lens's Python
// expression (testdata/lens-sampled-ranks.json).
type lensVectors struct {
	Cases []struct {
		Rate         float64  `json:"rate"`
		RanksChecked [2]int64 `json:"ranks_checked"`
		Kept         []int64  `json:"kept"`
	} `json:"cases"`
	Buckets map[string]int `json:"buckets"`
}

func loadLensVectors(tb testing.TB) lensVectors {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "lens-sampled-ranks.json"))
	require.NoError(tb, err)
	var v lensVectors
	require.NoError(tb, json.Unmarshal(raw, &v))
	require.NotEmpty(tb, v.Cases)
	return v
}

// rankName names a rank in span names, metric names and log bodies so that
// the output can be read back as a set of ranks: run/group/rank.
func rankName(r lensfixture.Rank) string { return fmt.Sprintf("%s/%s/%d", r.Run, r.Group, r.Rank) }

// tracesFor builds one batch with a resource per rank and one span, carrying
// megatron.iteration like a step span, named after the rank.
func tracesFor(ranks []lensfixture.Rank) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range ranks {
		span := lensfixture.AppendResource(td, r).AppendEmpty()
		span.SetName(rankName(r))
		span.Attributes().PutInt(attrkey.MegatronIteration, 1)
	}
	return td
}

func metricsFor(ranks []lensfixture.Rank) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, r := range ranks {
		rm := md.ResourceMetrics().AppendEmpty()
		r.PutResource(rm.Resource().Attributes())
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(rankName(r))
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(2.5)
	}
	return md
}

func logsFor(ranks []lensfixture.Rank) plog.Logs {
	ld := plog.NewLogs()
	for _, r := range ranks {
		rl := ld.ResourceLogs().AppendEmpty()
		r.PutResource(rl.Resource().Attributes())
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.Body().SetStr(rankName(r))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
	}
	return ld
}

func spanNames(batches []ptrace.Traces) []string {
	var names []string
	for _, td := range batches {
		for _, s := range spantest.All(td) {
			names = append(names, s.Name())
		}
	}
	return names
}

func metricNames(batches []pmetric.Metrics) []string {
	var names []string
	for _, md := range batches {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				for k := 0; k < sms.At(j).Metrics().Len(); k++ {
					names = append(names, sms.At(j).Metrics().At(k).Name())
				}
			}
		}
	}
	return names
}

func logBodies(batches []plog.Logs) []string {
	var bodies []string
	for _, ld := range batches {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
					bodies = append(bodies, sls.At(j).LogRecords().At(k).Body().Str())
				}
			}
		}
	}
	return bodies
}

// harness is one processor of each signal over the same config, with sinks,
// an observed logger and an in-memory meter.
type harness struct {
	traces  processor.Traces
	metrics processor.Metrics
	logs    processor.Logs
	tsink   *consumertest.TracesSink
	msink   *consumertest.MetricsSink
	lsink   *consumertest.LogsSink
	logged  *observer.ObservedLogs
	tel     *componenttest.Telemetry
}

func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())

	core, logged := observer.New(zapcore.DebugLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)

	h := &harness{
		tsink:  new(consumertest.TracesSink),
		msink:  new(consumertest.MetricsSink),
		lsink:  new(consumertest.LogsSink),
		logged: logged,
		tel:    tel,
	}
	f := NewFactory()
	ctx := t.Context()
	var err error
	h.traces, err = f.CreateTraces(ctx, set, cfg, h.tsink)
	require.NoError(t, err)
	h.metrics, err = f.CreateMetrics(ctx, set, cfg, h.msink)
	require.NoError(t, err)
	h.logs, err = f.CreateLogs(ctx, set, cfg, h.lsink)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, h.traces.Start(ctx, host))
	require.NoError(t, h.metrics.Start(ctx, host))
	require.NoError(t, h.logs.Start(ctx, host))
	//nolint:usetesting // t.Context() is canceled before Cleanup runs
	t.Cleanup(func() {
		require.NoError(t, h.traces.Shutdown(context.Background()))
		require.NoError(t, h.metrics.Shutdown(context.Background()))
		require.NoError(t, h.logs.Shutdown(context.Background()))
	})
	return h
}

// nopSettings are plain settings for tests that do not read telemetry.
func nopSettings() processor.Settings {
	return processortest.NewNopSettings(metadata.Type)
}
