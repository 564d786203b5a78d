// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// keptOutput collects kept straggler spans, grouped under copies of their
// original resource and scope, until the ticker passes them on.
type keptOutput struct {
	td    ptrace.Traces
	count int
	mover pdatautil.SpanMover[*steps.Chunk[rankID]]
}

func newKeptOutput() keptOutput {
	o := keptOutput{td: ptrace.NewTraces(), mover: pdatautil.NewSpanMover[*steps.Chunk[rankID]]()}
	o.mover.Reset(o.td.ResourceSpans())
	return o
}

// add moves the span out of its chunk into the output and marks it with the
// reason and the rank's scores. It reports whether the chunk holds nothing
// more.
func (o *keptOutput) add(h heldSpan, score stepbusy.Score) bool {
	dst, emptied := h.Move(&o.mover)
	attrs := dst.Attributes()
	attrs.PutStr(attrkey.KeptReason, reasonStraggler.String())
	attrs.PutDouble(attrkey.RelativeScore, stepbusy.Round3(score.Relative))
	attrs.PutDouble(attrkey.IndividualScore, stepbusy.Round3(score.Individual))
	o.count++
	return emptied
}

func (o *keptOutput) take() (ptrace.Traces, int) {
	td, n := o.td, o.count
	if n == 0 {
		return td, 0
	}
	o.td = ptrace.NewTraces()
	o.count = 0
	o.mover.Reset(o.td.ResourceSpans())
	return td, n
}
