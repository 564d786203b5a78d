// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// decideSteps decides every rank step of the batch: kept when its iteration
// is in the sample; otherwise when rank_strategy kept it as a straggler, or
// one of its spans is an error; otherwise when it was kept for one of those
// in an earlier batch; dropped otherwise.
func (p *stepSamplingProcessor) decideSteps() {
	b := &p.b
	for i := range b.steps {
		st := &b.steps[i]
		switch {
		case p.sampler.keep(st.runID, st.key.iteration):
			st.keep, st.reason = true, reasonSampledStep
		case st.straggler:
			st.keep, st.reason = true, reasonStraggler
			p.memory.remember(st.key.rank, st.key.iteration, reasonStraggler)
		case st.err:
			st.keep, st.reason = true, reasonError
			p.memory.remember(st.key.rank, st.key.iteration, reasonError)
		default:
			st.reason, st.keep = p.memory.lookup(st.key.rank, st.key.iteration)
		}
	}
}

// apply carries the decisions out: in the resources that stay in the batch
// kept spans stay, marked, and dropped ones leave; the placed spans of the
// resources moved out (some of their spans wait) move back into the batch
// if kept; the spans that waited and were placed now go out on their own
// (steps.Output).
func (p *stepSamplingProcessor) apply(rss ptrace.ResourceSpansSlice) {
	b := &p.b
	i := 0
	rss.RemoveIf(func(rs ptrace.ResourceSpans) bool {
		res := &b.resources[i]
		i++
		switch {
		case !res.ok:
			p.t.kept[reasonNoRank] += int64(pdatautil.CountSpans(rs))
			return false
		case res.chunk != nil:
			return true // moved out: emptied
		}
		return p.filterInPlace(rs, b.spans[res.first:res.last])
	})
	b.mover.Reset(rss)
	for j := range b.resources {
		res := &b.resources[j]
		if res.chunk == nil {
			continue
		}
		for _, rec := range b.spans[res.first:res.last] {
			if keep, reason := p.decision(rec.kind, rec.step); keep {
				s, _ := rec.ref.Held.Move(&b.mover)
				p.mark(s, rec.kind, reason)
			} else {
				p.t.dropped++
				rec.ref.Held.Release()
			}
		}
	}
	b.mover.Reset(ptrace.ResourceSpansSlice{})
	for _, rec := range b.resolved {
		if keep, reason := p.decision(rec.kind, rec.step); keep {
			s, _ := p.out.Add(rec.held)
			p.mark(s, rec.kind, reason)
		} else {
			p.t.dropped++
			rec.held.Release()
		}
	}
}

// decision is whether a span placed so is kept, and why.
func (p *stepSamplingProcessor) decision(kind placeKind, step int32) (bool, keepReason) {
	if kind != placeInStep {
		return true, reasonOutsideStep
	}
	st := &p.b.steps[step]
	return st.keep, st.reason
}

// filterInPlace removes the dropped spans of a resource that stays in the
// batch and marks and counts the kept ones; it says whether the resource is
// left empty.
func (p *stepSamplingProcessor) filterInPlace(rs ptrace.ResourceSpans, recs []spanRec) bool {
	anyDropped := false
	for _, rec := range recs {
		if keep, _ := p.decision(rec.kind, rec.step); !keep {
			anyDropped = true
			break
		}
	}
	k := 0
	next := func(s ptrace.Span) bool {
		rec := recs[k]
		k++
		keep, reason := p.decision(rec.kind, rec.step)
		if !keep {
			p.t.dropped++
			return false
		}
		p.mark(s, rec.kind, reason)
		return true
	}
	if !anyDropped {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				next(s)
			}
		}
		return false
	}
	rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !next(s) })
		return ss.Spans().Len() == 0
	})
	return rs.ScopeSpans().Len() == 0
}

// mark counts a kept span and says why it was kept, unless an earlier
// processor (rank_strategy) already did; a span outside every step is
// passed untouched.
func (p *stepSamplingProcessor) mark(s ptrace.Span, kind placeKind, r keepReason) {
	p.t.kept[r]++
	if kind != placeInStep {
		return
	}
	attrs := s.Attributes()
	if _, ok := attrs.Get(attrkey.KeptReason); !ok {
		attrs.PutStr(attrkey.KeptReason, r.String())
	}
}

// passUndecided passes a span that waited in vain on, untouched.
func (p *stepSamplingProcessor) passUndecided(h steps.Held, cause undecidedCause) {
	p.out.Add(h)
	p.t.undecided[cause]++
}

// isError: status ERROR, or force-closed at shutdown (nemo.span.truncated).
func isError(s ptrace.Span) bool {
	if s.Status().Code() == ptrace.StatusCodeError {
		return true
	}
	return pdatautil.Truncated(s)
}

// isStraggler: rank_strategy kept the span's step as a straggler.
func isStraggler(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(attrkey.KeptReason)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == attrkey.KeptStraggler
}
