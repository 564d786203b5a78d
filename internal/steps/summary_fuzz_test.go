// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// FuzzSummaries: whatever an agent (or anything posing as one) sends in a
// summary scope, a gateway's engine reads it without failing, and decides
// and scores what it recorded: a summary is data from the network.
func FuzzSummaries(f *testing.F) {
	f.Add("step", int64(3), int64(15_000_000), uint64(1_000), uint64(101_000_000), int64(4), "1")
	f.Add("progress", int64(0), int64(0), uint64(5), uint64(4), int64(-1), "1")
	f.Add("phase", int64(-7), int64(-1), uint64(0), uint64(0), int64(1<<40), "2")
	f.Add("", int64(1<<62), int64(1<<62), uint64(1<<63), uint64(1), int64(0), "")
	f.Fuzz(func(t *testing.T, kind string, iteration, wait int64, start, end uint64, counts int64, version string) {
		rec := &recorder{}
		e, clk := testEngine(t, rec, nil)
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt(attrkey.DLRank, 1)
		rs.Resource().Attributes().PutInt(attrkey.DLWorldSize, 2)
		spans := stepsummary.NewScope(rs)
		rs.ScopeSpans().At(0).Scope().SetVersion(version)
		s := spans.AppendEmpty()
		s.SetName(attrkey.MegatronTrainStep)
		s.SetStartTimestamp(pcommon.Timestamp(start))
		s.SetEndTimestamp(pcommon.Timestamp(end))
		attrs := s.Attributes()
		attrs.PutStr(stepsummary.AttrKind, kind)
		attrs.PutInt(stepsummary.AttrIteration, iteration)
		attrs.PutInt(stepsummary.AttrWait, wait)
		attrs.PutInt(stepsummary.AttrForwards, counts)
		attrs.PutInt(stepsummary.AttrBackwards, counts)
		s.CopyTo(spans.AppendEmpty()) // the same summary twice
		consume(t, e, rec, td)
		clk.Advance(time.Second)
		for _, d := range rec.decisions {
			for _, r := range d.Ranks {
				if r.Score.Relative < 0 || r.Score.Relative > 1 || r.Score.Individual < 0 || r.Score.Individual > 1 {
					t.Fatalf("scores out of [0,1]: %+v", r.Score)
				}
			}
		}
	})
}
