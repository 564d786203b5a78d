// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
)

// moveHeld moves a held span out of its chunk into the mover's outgoing
// batch, under a copy of the chunk's resource and scope, and returns it
// there; the chunk keeps an empty span in its place.
func moveHeld(m *pdatautil.SpanMover[*heldChunk], r heldRef) ptrace.Span {
	cs := r.chunk.spans[r.i]
	return m.Move(r.chunk, r.chunk.rs, int(cs.scope), cs.span)
}
