package rankstrategyprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

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

// rankProcess describes one emulated training process.
type rankProcess struct {
	run, group string // "" leaves the attribute out
	rank       int64
	worldSize  int64 // 0 leaves the attribute out
	localRank  int64 // -1 leaves the attribute out
	asString   bool  // send rank identity as strings, as OTEL_RESOURCE_ATTRIBUTES does
	oldKeys    bool  // dl.* instead of nv.dl.*
}

// fillResource sets the resource attributes NeMo Lens would send for p.
func (p rankProcess) fillResource(attrs pcommon.Map) {
	attrs.PutStr("service.name", "nemo")
	if p.run != "" {
		attrs.PutStr("nemo.run.id", p.run)
		attrs.PutStr("service.instance.id", fmt.Sprintf("%s-rank%d", p.run, p.rank))
	}
	if p.group != "" {
		attrs.PutStr("rl.worker_group", p.group)
	}
	prefix := "nv.dl."
	if p.oldKeys {
		prefix = "dl."
	}
	put := func(key string, v int64) {
		if p.asString {
			attrs.PutStr(prefix+key, strconv.FormatInt(v, 10))
		} else {
			attrs.PutInt(prefix+key, v)
		}
	}
	put("rank", p.rank)
	if p.worldSize > 0 {
		put("world_size", p.worldSize)
	}
	if p.localRank >= 0 {
		put("local_rank", p.localRank)
	}
}

// id names the process in span names, metric names and log bodies so that
// the output can be read back as a set of processes.
func (p rankProcess) id() string { return fmt.Sprintf("%s/%s/%d", p.run, p.group, p.rank) }

// fleet returns every rank of each (run, group, world size), alternating int
// and string values and the two key spellings.
func fleet(groups ...rankProcess) []rankProcess {
	var out []rankProcess
	for _, g := range groups {
		for r := range g.worldSize {
			p := g
			p.rank = r
			p.localRank = r % 8
			p.asString = r%2 == 1
			p.oldKeys = (r/2)%2 == 1
			out = append(out, p)
		}
	}
	return out
}

// tracesFor builds one batch with a resource per process and one
// megatron.train_step span named after the process.
func tracesFor(procs []rankProcess) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, p := range procs {
		rs := td.ResourceSpans().AppendEmpty()
		p.fillResource(rs.Resource().Attributes())
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetName(p.id())
		span.Attributes().PutInt("megatron.iteration", 1)
	}
	return td
}

func metricsFor(procs []rankProcess) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, p := range procs {
		rm := md.ResourceMetrics().AppendEmpty()
		p.fillResource(rm.Resource().Attributes())
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(p.id())
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(2.5)
	}
	return md
}

func logsFor(procs []rankProcess) plog.Logs {
	ld := plog.NewLogs()
	for _, p := range procs {
		rl := ld.ResourceLogs().AppendEmpty()
		p.fillResource(rl.Resource().Attributes())
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.Body().SetStr(p.id())
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
	}
	return ld
}

func spanNames(batches []ptrace.Traces) []string {
	var names []string
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					names = append(names, sss.At(j).Spans().At(k).Name())
				}
			}
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
