// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsummary

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

func stepSpan() ptrace.Span {
	s := ptrace.NewSpan()
	s.SetName(attrkey.MegatronTrainStep)
	s.SetTraceID(pcommon.TraceID{1})
	s.SetSpanID(pcommon.SpanID{2})
	s.SetParentSpanID(pcommon.SpanID{3})
	s.SetStartTimestamp(1_000)
	s.SetEndTimestamp(101_000)
	s.Attributes().PutInt(attrkey.MegatronIteration, 7)
	s.Attributes().PutInt(attrkey.MegatronNumMicrobatches, 4)
	s.Attributes().PutInt(attrkey.PipelineRank, 1)
	s.Attributes().PutDouble("megatron.loss", 2.5)
	return s
}

// A summary keeps the envelope of its span and the attributes the reader
// needs, nothing else, and reads back as it was written.
func TestWriteAndRead(t *testing.T) {
	rs := ptrace.NewResourceSpans()
	spans := NewScope(rs)
	require.True(t, Has(rs))
	assert.Equal(t, Version, rs.ScopeSpans().At(0).Scope().Version())

	from := stepSpan()
	step := spans.AppendEmpty()
	WriteStep(step, from, 7, 15_000, 4)
	assert.Equal(t, from.Name(), step.Name())
	assert.Equal(t, from.TraceID(), step.TraceID())
	assert.Equal(t, from.SpanID(), step.SpanID())
	assert.Equal(t, from.ParentSpanID(), step.ParentSpanID())
	assert.Equal(t, from.StartTimestamp(), step.StartTimestamp())
	assert.Equal(t, from.EndTimestamp(), step.EndTimestamp())
	assert.Equal(t, map[string]any{
		AttrKind: "step", AttrIteration: int64(7), AttrWait: int64(15_000), AttrForwards: int64(4),
		attrkey.MegatronNumMicrobatches: int64(4), attrkey.PipelineRank: int64(1),
	}, step.Attributes().AsRaw())
	item, ok := Read(step)
	require.True(t, ok)
	assert.Equal(t, Item{Kind: KindStep, Iteration: 7, Wait: 15_000, Counts: Counts{Forwards: 4}}, item)

	phase := spans.AppendEmpty()
	WritePhase(phase, from)
	item, ok = Read(phase)
	require.True(t, ok)
	assert.Equal(t, KindPhase, item.Kind)
	assert.Equal(t, map[string]any{AttrKind: "phase"}, phase.Attributes().AsRaw())

	beat := spans.AppendEmpty()
	WriteProgress(beat, from, Counts{Forwards: 3, Backwards: 1}, 2)
	item, ok = Read(beat)
	require.True(t, ok)
	assert.Equal(t, Item{Kind: KindProgress, Counts: Counts{Forwards: 3, Backwards: 1}}, item)
	stage, _ := beat.Attributes().Get(attrkey.PipelineRank)
	assert.Equal(t, int64(2), stage.Int(), "the stage travels as the span attribute the stall detector reads")
}

// What this version cannot read is refused: an unknown kind, a step
// without its iteration, a span that is no summary.
func TestReadRefuses(t *testing.T) {
	unknown := ptrace.NewSpan()
	unknown.Attributes().PutStr(AttrKind, "rank-heartbeat")
	noIteration := ptrace.NewSpan()
	noIteration.Attributes().PutStr(AttrKind, "step")
	stringIteration := ptrace.NewSpan()
	stringIteration.Attributes().PutStr(AttrKind, "step")
	stringIteration.Attributes().PutStr(AttrIteration, "7")
	for name, s := range map[string]ptrace.Span{
		"not a summary": ptrace.NewSpan(), "unknown kind": unknown, "no iteration": noIteration, "string iteration": stringIteration,
	} {
		_, ok := Read(s)
		assert.False(t, ok, name)
	}
}

// A summary's resource holds the rank's identity only, and is copied again
// only when the identity changed.
func TestPutIdentity(t *testing.T) {
	from := pcommon.NewMap()
	from.PutStr(attrkey.ServiceName, "nemo")
	from.PutStr(attrkey.HostName, "node-3")
	from.PutInt("process.pid", 4242)
	from.PutInt(attrkey.DLRank, 7)
	from.PutStr(attrkey.RunID, "run-1")
	from.PutStr("slurm.job.name", "pretrain")
	from.PutStr(attrkey.WandbProject, "p")
	keys := append(slices.Clone(IdentityKeys), attrkey.DLRank, attrkey.RunID)

	dst := pcommon.NewMap()
	assert.True(t, PutIdentity(dst, from, keys))
	assert.Equal(t, map[string]any{
		attrkey.ServiceName: "nemo", attrkey.HostName: "node-3", "process.pid": int64(4242), attrkey.DLRank: int64(7), attrkey.RunID: "run-1",
	}, dst.AsRaw())
	assert.False(t, PutIdentity(dst, from, keys), "the same identity again")

	from.PutInt("process.pid", 4343) // the rank restarted
	assert.True(t, PutIdentity(dst, from, keys))
	pid, _ := dst.Get("process.pid")
	assert.Equal(t, int64(4343), pid.Int())
	from.Remove(attrkey.HostName)
	assert.True(t, PutIdentity(dst, from, keys))
	_, ok := dst.Get(attrkey.HostName)
	assert.False(t, ok)
}
