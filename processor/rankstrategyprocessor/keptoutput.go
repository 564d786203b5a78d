package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// The scores carried, beside keptReasonKey, by every span of a kept straggler
// step (see internal/stepbusy). They are siblings under nemo.rank_strategy:
// none is a dotted prefix of another, so Weave accepts them all.
const (
	relativeScoreKey   = "nemo.rank_strategy.relative_score"
	individualScoreKey = "nemo.rank_strategy.individual_score"
)

// keptOutput collects kept straggler spans, grouped under copies of their
// original resource and scope, until the ticker passes them on.
type keptOutput struct {
	td      ptrace.Traces
	count   int
	byChunk map[*heldChunk]*keptResource
}

type keptResource struct {
	rs ptrace.ResourceSpans
	// scopes maps a scope index in the chunk to its index in rs, -1 when
	// not created yet.
	scopes []int32
}

func newKeptOutput() keptOutput {
	return keptOutput{td: ptrace.NewTraces(), byChunk: make(map[*heldChunk]*keptResource)}
}

// add moves the span out of its chunk into the output and marks it with the
// reason and the rank's scores.
func (o *keptOutput) add(ref spanRef, score stepbusy.Score) {
	kr := o.byChunk[ref.chunk]
	if kr == nil {
		src := ref.chunk.rs
		rs := o.td.ResourceSpans().AppendEmpty()
		src.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(src.SchemaUrl())
		kr = &keptResource{rs: rs, scopes: make([]int32, src.ScopeSpans().Len())}
		for i := range kr.scopes {
			kr.scopes[i] = -1
		}
		o.byChunk[ref.chunk] = kr
	}
	si := kr.scopes[ref.scope]
	if si < 0 {
		src := ref.chunk.rs.ScopeSpans().At(int(ref.scope))
		ss := kr.rs.ScopeSpans().AppendEmpty()
		src.Scope().CopyTo(ss.Scope())
		ss.SetSchemaUrl(src.SchemaUrl())
		si = int32(kr.rs.ScopeSpans().Len() - 1)
		kr.scopes[ref.scope] = si
	}
	dst := kr.rs.ScopeSpans().At(int(si)).Spans().AppendEmpty()
	ref.span.MoveTo(dst)
	attrs := dst.Attributes()
	attrs.PutStr(keptReasonKey, reasonStraggler.String())
	attrs.PutDouble(relativeScoreKey, stepbusy.Round3(score.Relative))
	attrs.PutDouble(individualScoreKey, stepbusy.Round3(score.Individual))
	o.count++
}

func (o *keptOutput) take() (ptrace.Traces, int) {
	td, n := o.td, o.count
	if n == 0 {
		return td, 0
	}
	o.td = ptrace.NewTraces()
	o.count = 0
	clear(o.byChunk)
	return td, n
}
