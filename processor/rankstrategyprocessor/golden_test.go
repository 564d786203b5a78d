// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

func TestGoldenTraces(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{
			// export_rank -1: the last rank of each run by its own world
			// size, whatever the key spelling and value type; a resource
			// without a rank is kept (on_missing_rank: keep).
			name: "single_rank",
		},
		{
			// md5 buckets of ranks 0..7: 7850, 8411, 9212, 883, 1900, 693,
			// 412, 5555; below 5000 are ranks 3, 4, 5 and 6.
			name: "sampled",
			edit: func(cfg *Config) {
				cfg.Strategy = StrategySampled
				cfg.SampleRate = 0.5
			},
		},
		{
			// Local rank 0 on each node (ranks 0 and 4); rank 8 has no
			// local rank and on_missing_rank drops it.
			name: "first_rank_per_node",
			edit: func(cfg *Config) {
				cfg.Strategy = StrategyFirstRankPerNode
				cfg.OnMissingRank = MissingRankDrop
			},
		},
		{
			// Rank 0 kept whole, unmarked; from rank 1 only the ERROR span
			// and the spans truncated as a bool or a string, marked.
			name: "keep_errors",
			edit: func(cfg *Config) { cfg.ExportRank = 0 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			if tt.edit != nil {
				tt.edit(cfg)
			}
			require.NoError(t, cfg.Validate())
			goldentest.Traces(t, NewFactory(), cfg, filepath.Join("testdata", tt.name))
		})
	}
}

// goldenSignalRanks are the ranks of the metrics and logs cases: the 4
// ranks of golden-run (the straggler cases' job), the 2 ranks of
// golden-eval (a second run, in which the last rank is 1) and a resource
// with no rank at all, a data loader's.
func goldenSignalRanks() (lensfixture.Run, []lensfixture.Rank) {
	ranks := lensfixture.Fleet(lensfixture.Rank{Run: "golden-run", WorldSize: 4})
	ranks = append(ranks, lensfixture.Fleet(lensfixture.Rank{Run: "golden-eval", WorldSize: 2})...)
	return goldenStragglerRun(lensfixture.Shape{}), ranks
}

// goldenDataLoader is the resource without a rank.
var goldenDataLoader = []lensfixture.KeyValue{{Key: attrkey.ServiceName, Value: "data-loader"}, {Key: attrkey.HostName, Value: "node000"}}

func putAttrs(attrs pcommon.Map, kvs []lensfixture.KeyValue) {
	for _, kv := range kvs {
		attrs.PutStr(kv.Key, kv.Value.(string))
	}
}

// goldenMetrics is every rank's Megatron training metrics of iteration 1
// (8 metrics, a point each) and one gauge from the data loader.
func goldenMetrics() pmetric.Metrics {
	run, ranks := goldenSignalRanks()
	md := pmetric.NewMetrics()
	for _, rank := range ranks {
		rm := md.ResourceMetrics().AppendEmpty()
		rank.PutResource(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(lensfixture.ScopeName)
		run.AppendMetrics(sm.Metrics(), rank, 1)
	}
	rm := md.ResourceMetrics().AppendEmpty()
	putAttrs(rm.Resource().Attributes(), goldenDataLoader)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("dataloader.queue_depth")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(12)
	return md
}

// The metrics path, with the stragglers block on as the presets have it
// (it is for traces only): of golden-run only rank 3's resource, of
// golden-eval only rank 1's, each whole with its 8 metrics; the data
// loader's resource is kept (on_missing_rank: keep). Metrics carry no
// error status, so keep_errors keeps nothing of the dropped ranks.
func TestGoldenMetrics(t *testing.T) {
	dir := filepath.Join("testdata", "metrics")
	goldentest.WriteInput(t, dir, goldenMetrics)
	cfg := createDefaultConfig().(*Config)
	cfg.Stragglers.GetOrInsertDefault()
	require.NoError(t, cfg.Validate())
	goldentest.Metrics(t, NewFactory(), cfg, dir)
}

// goldenLogs is one batch of log records about iteration 1: an INFO line
// from every rank; from golden-run's rank 0 a WARNING, rank 1 an ERROR,
// rank 2 a CRITICAL sent with its severity text only (no number), rank 3
// a DEBUG; from golden-eval's rank 0 an ERROR2; and an INFO line from the
// data loader.
func goldenLogs() plog.Logs {
	run, ranks := goldenSignalRanks()
	extra := map[string]struct {
		severity plog.SeverityNumber
		body     string
	}{
		"golden-run-rank0":  {plog.SeverityNumberWarn, "loss spike: 3.91 at iteration 1"},
		"golden-run-rank1":  {plog.SeverityNumberError, "NCCL watchdog: collective operation timeout"},
		"golden-run-rank2":  {plog.SeverityNumberFatal, "CUDA error: an illegal memory access was encountered"},
		"golden-run-rank3":  {plog.SeverityNumberDebug, "dataloader: prefetched 4 batches"},
		"golden-eval-rank0": {plog.SeverityNumberError2, "evaluation: NaN in validation loss"},
	}
	ld := plog.NewLogs()
	for _, rank := range ranks {
		rl := ld.ResourceLogs().AppendEmpty()
		rank.PutResource(rl.Resource().Attributes())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(lensfixture.ScopeName)
		run.AppendLog(sl.LogRecords(), rank, 1, plog.SeverityNumberInfo, "iteration 1 done")
		if e, ok := extra[rank.InstanceID()]; ok {
			lr := run.AppendLog(sl.LogRecords(), rank, 1, e.severity, e.body)
			if e.severity == plog.SeverityNumberFatal {
				lr.SetSeverityNumber(plog.SeverityNumberUnspecified)
				lr.SetSeverityText("CRITICAL") // Python logging's name, as sent by a logging bridge
			}
		}
	}
	rl := ld.ResourceLogs().AppendEmpty()
	putAttrs(rl.Resource().Attributes(), goldenDataLoader)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	lr.SetSeverityText("INFO")
	lr.Body().SetStr("epoch 0: 1024 shards")
	return ld
}

// The logs path with the defaults (keep_errors on, keep_log_severity
// ERROR) and the stragglers block on, which logs ignore: golden-run's rank
// 3 and golden-eval's rank 1 kept whole and unmarked; from the dropped
// ranks only the records at ERROR or above, marked kept_reason severity:
// golden-run rank 1's ERROR, rank 2's CRITICAL (read from its text as
// FATAL) and golden-eval rank 0's ERROR2; not rank 0's WARNING nor any
// dropped rank's INFO. The data loader's record is kept (on_missing_rank:
// keep), unmarked.
func TestGoldenLogs(t *testing.T) {
	dir := filepath.Join("testdata", "logs")
	goldentest.WriteInput(t, dir, goldenLogs)
	cfg := createDefaultConfig().(*Config)
	cfg.Stragglers.GetOrInsertDefault()
	require.NoError(t, cfg.Validate())
	goldentest.Logs(t, NewFactory(), cfg, dir)
}
