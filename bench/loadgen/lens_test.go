// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

func testJob(t *testing.T, args ...string) (options, job) {
	t.Helper()
	o, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	return o, o.job()
}

const ref = int64(1_800_000_000_000_000_000)

func buildAll(t *testing.T, j job) []*template {
	t.Helper()
	templates, err := buildTemplates(j, ref)
	require.NoError(t, err)
	require.Len(t, templates, j.ranks)
	return templates
}

func decodeTraces(t *testing.T, b []byte) ptrace.Traces {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(b))
	return req.Traces()
}

func spansOf(td ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				out = append(out, sp)
			}
		}
	}
	return out
}

func TestTraceTemplateShape(t *testing.T) {
	o, j := testJob(t, "-ranks", "4", "-batch", "100", "-start-iteration", "7")
	require.Equal(t, 20, j.spansPerStep())
	require.Equal(t, 5, j.stepsPerRequest)
	templates := buildAll(t, j)

	shift := int64(3 * time.Second)
	for rank, tpl := range templates {
		td := decodeTraces(t, tpl.render(nil, replay{mask: 0x1234, shift: shift, iteration: int64(o.startIteration)}))
		require.Equal(t, 100, td.SpanCount())
		res := td.ResourceSpans().At(0).Resource().Attributes()
		for _, k := range []string{"service.name", "service.instance.id", "nemo.run.id", "nv.dl.rank", "nv.dl.world_size", "nv.dl.local_rank", "host.name", "slurm.job.id", "wandb.entity", "wandb.project"} {
			_, ok := res.Get(k)
			assert.True(t, ok, "resource attribute %s", k)
		}
		r, _ := res.Get("nv.dl.rank")
		assert.Equal(t, int64(rank), r.Int())

		var iterations []int64
		var lastEnd pcommon.Timestamp
		for _, sp := range spansOf(td) {
			assert.LessOrEqual(t, sp.StartTimestamp(), sp.EndTimestamp(), sp.Name())
			lastEnd = max(lastEnd, sp.EndTimestamp())
			if sp.Name() == attrkey.MegatronTrainStep {
				it, ok := sp.Attributes().Get(attrkey.MegatronIteration)
				require.True(t, ok)
				require.Equal(t, pcommon.ValueTypeInt, it.Type())
				iterations = append(iterations, it.Int())
				assert.GreaterOrEqual(t, sp.Attributes().Len(), 12)
			}
		}
		assert.Equal(t, []int64{7, 8, 9, 10, 11}, iterations)
		assert.Equal(t, pcommon.Timestamp(ref+shift), lastEnd, "the last step ends at send time")
	}
}

// TestTraceReplaysDiffer checks what downstream processors rely on: every
// replay has new span ids, the tree and the pipeline links stay intact, and
// iterations advance.
func TestTraceReplaysDiffer(t *testing.T) {
	_, j := testJob(t, "-ranks", "4", "-pp", "2", "-batch", "40")
	templates := buildAll(t, j)
	seen := map[pcommon.SpanID]bool{}
	for round := range 3 {
		rp := replay{mask: j.hash(11, uint64(round)), shift: int64(round) * int64(time.Second), iteration: int64(1 + round*j.stepsPerRequest)}
		sendForward := map[pcommon.SpanID]bool{}
		var links []ptrace.SpanLink
		traceOfRank := map[int]pcommon.TraceID{}
		for rank, tpl := range templates {
			spans := spansOf(decodeTraces(t, tpl.render(nil, rp)))
			ids := map[pcommon.SpanID]bool{}
			for _, sp := range spans {
				require.False(t, seen[sp.SpanID()], "span id %s repeated (round %d)", sp.SpanID(), round)
				seen[sp.SpanID()] = true
				ids[sp.SpanID()] = true
				if sp.Name() == "megatron.p2p.send_forward" {
					sendForward[sp.SpanID()] = true
				}
				for _, l := range sp.Links().All() {
					links = append(links, l)
				}
				if prev, ok := traceOfRank[rank]; ok {
					require.Equal(t, prev, sp.TraceID(), "rank trace scope: one trace per rank")
				}
				traceOfRank[rank] = sp.TraceID()
			}
			for _, sp := range spans {
				if sp.Name() == attrkey.MegatronTrainStep {
					assert.Equal(t, j.trainSpanID(rank), sp.ParentSpanID(), "steps hang under the rank's megatron.train span")
					it, _ := sp.Attributes().Get(attrkey.MegatronIteration)
					assert.GreaterOrEqual(t, it.Int(), rp.iteration)
					continue
				}
				assert.True(t, ids[sp.ParentSpanID()], "%s has its parent in the request", sp.Name())
			}
		}
		// Ranks 2 and 3 are pipeline stage 1: they link to stage 0's send_forward of the same step.
		require.Len(t, links, 2*j.stepsPerRequest)
		for _, l := range links {
			assert.True(t, sendForward[l.SpanID()], "link points to a sent span")
		}
	}
}

func TestStepTraceScope(t *testing.T) {
	_, j := testJob(t, "-ranks", "2", "-batch", "60", "-trace-scope", "step")
	tpl := buildAll(t, j)[0]
	traces := map[pcommon.TraceID]int{}
	for round := range 2 {
		for _, sp := range spansOf(decodeTraces(t, tpl.render(nil, replay{mask: j.hash(11, uint64(round))}))) {
			traces[sp.TraceID()]++
			if sp.Name() == attrkey.MegatronTrainStep {
				assert.True(t, sp.ParentSpanID().IsEmpty(), "a step is a root in step scope")
			}
		}
	}
	require.Len(t, traces, 2*j.stepsPerRequest)
	for _, n := range traces {
		assert.Equal(t, j.spansPerStep(), n)
	}
}

func TestRankKeysMixed(t *testing.T) {
	_, j := testJob(t, "-ranks", "4", "-rank-keys", "mixed", "-run-id", "random", "-batch", "20")
	templates := buildAll(t, j)
	runIDs := map[string]bool{}
	for rank, tpl := range templates {
		res := decodeTraces(t, tpl.render(nil, replay{})).ResourceSpans().At(0).Resource().Attributes()
		key := "nv.dl.rank"
		if rank%2 == 1 {
			key = "dl.rank"
		}
		v, ok := res.Get(key)
		require.True(t, ok, "rank %d sends %s", rank, key)
		if rank%3 == 0 {
			assert.Equal(t, pcommon.ValueTypeStr, v.Type())
		} else {
			assert.Equal(t, pcommon.ValueTypeInt, v.Type())
		}
		id, _ := res.Get("nemo.run.id")
		runIDs[id.Str()] = true
	}
	assert.Len(t, runIDs, 4, "random run id: one per rank")
}

func TestMetricTemplate(t *testing.T) {
	_, j := testJob(t, "-signal", "metrics", "-ranks", "2", "-batch", "40")
	require.Equal(t, 5, j.stepsPerRequest)
	tpl := buildAll(t, j)[0]
	shift := int64(time.Minute)
	req := pmetricotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(tpl.render(nil, replay{shift: shift})))
	md := req.Metrics()
	require.Equal(t, 40, md.DataPointCount())
	names := map[string]bool{}
	var last pcommon.Timestamp
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for _, m := range ms.All() {
		names[m.Name()] = true
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			for _, dp := range m.Gauge().DataPoints().All() {
				last = max(last, dp.Timestamp())
			}
		case pmetric.MetricTypeHistogram:
			for _, dp := range m.Histogram().DataPoints().All() {
				assert.Less(t, dp.StartTimestamp(), dp.Timestamp())
			}
		}
	}
	assert.Len(t, names, lensfixture.MetricsPerStep)
	assert.True(t, names[lensfixture.StepDurationMetric])
	assert.Equal(t, pcommon.Timestamp(ref+shift), last)
}

func TestLogTemplate(t *testing.T) {
	_, j := testJob(t, "-signal", "logs", "-ranks", "2", "-batch", "3")
	tpl := buildAll(t, j)[1]
	req := plogotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(tpl.render(nil, replay{iteration: 123456})))
	ld := req.Logs()
	require.Equal(t, 3, ld.LogRecordCount())
	for s, lr := range ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().All() {
		it, _ := lr.Attributes().Get(attrkey.MegatronIteration)
		assert.Equal(t, int64(123456+s), it.Int())
		assert.True(t, strings.HasPrefix(lr.Body().Str(), " iteration   12345"+string(rune('6'+s))+"/"), lr.Body().Str())
		assert.Equal(t, plog.SeverityNumberInfo, lr.SeverityNumber())
		assert.False(t, lr.TraceID().IsEmpty())
	}
}

func TestPutVarintWidth(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 16383, 16384, 99_999_999, 1 << 34} {
		b := make([]byte, varintWidth)
		putVarintWidth(b, v)
		got, n := protowire.ConsumeVarint(b)
		require.Equal(t, varintWidth, n)
		assert.Equal(t, v, got)
	}
}

func TestPutDigits(t *testing.T) {
	for v, want := range map[int64]string{0: "       0", 7: "       7", 1234: "    1234", 99_999_999: "99999999"} {
		b := make([]byte, 8)
		putDigits(b, v)
		assert.Equal(t, want, string(b))
	}
}

func TestFindPatchesRejectsGarbage(t *testing.T) {
	_, err := findPatches(signalTraces, []byte{0x0a, 0xff, 0xff}, false)
	assert.Error(t, err)
	_, err = findPatches("profiles", nil, false)
	assert.Error(t, err)
}

// spanMs returns the duration in ms of the first span named name in rank's
// template.
func spanMs(t *testing.T, templates []*template, rank int, name string) float64 {
	t.Helper()
	for _, sp := range spansOf(decodeTraces(t, templates[rank].render(nil, replay{}))) {
		if sp.Name() == name {
			return float64(sp.EndTimestamp()-sp.StartTimestamp()) / 1e6
		}
	}
	t.Fatalf("rank %d: no %s span", rank, name)
	return 0
}

// TestStragglersSynchronous: by default steps are synchronous: every rank's
// step lasts the same, the stragglers compute 3 times as long as the
// others, and the others spend the difference in grad_sync.finish.
func TestStragglersSynchronous(t *testing.T) {
	_, j := testJob(t, "-ranks", "4", "-stragglers", "2", "-straggle-factor", "3", "-batch", "20", "-step-duration", "100ms")
	templates := buildAll(t, j)
	step := spanMs(t, templates, 0, attrkey.MegatronTrainStep)
	assert.InDelta(t, 100, step, 5.1)
	for rank, slow := range []bool{true, false, true, false} {
		assert.InDelta(t, step, spanMs(t, templates, rank, attrkey.MegatronTrainStep), 1e-6, "rank %d: steps end together", rank)
		compute, wait := 0.7*step, 0.1*step
		if !slow {
			compute, wait = compute/3, wait+compute-compute/3
		}
		assert.InDelta(t, compute, spanMs(t, templates, rank, lensfixture.ForwardBackward), 1e-3, "rank %d", rank)
		assert.InDelta(t, wait, spanMs(t, templates, rank, lensfixture.GradSyncFinish), 1e-3, "rank %d", rank)
	}
}

// TestStragglersUnsynchronised: with -unsynchronised a straggler's whole
// step is longer.
func TestStragglersUnsynchronised(t *testing.T) {
	_, j := testJob(t, "-ranks", "4", "-stragglers", "2", "-straggle-factor", "3", "-batch", "20", "-step-duration", "100ms", "-unsynchronised")
	templates := buildAll(t, j)
	for rank, slow := range []bool{true, false, true, false} {
		want := 100.0
		if slow {
			want = 300
		}
		assert.InDelta(t, want, spanMs(t, templates, rank, attrkey.MegatronTrainStep), want*0.051, "rank %d", rank)
	}
}
