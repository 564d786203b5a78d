// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

// keepReason says why spans were passed on after a decision. The first
// three are also the values of attrkey.KeptReason on the spans of kept steps.
type keepReason uint8

const (
	reasonSampledStep keepReason = iota
	reasonError
	reasonStraggler
	reasonOutsideStep
	reasonNoRank
	numReasons
)

func (r keepReason) String() string {
	switch r {
	case reasonSampledStep:
		return attrkey.KeptSampledStep
	case reasonError:
		return attrkey.KeptError
	case reasonStraggler:
		return attrkey.KeptStraggler
	case reasonOutsideStep:
		return "outside_step"
	default:
		return "no_rank"
	}
}

// undecidedCause says why held spans were passed on before their step was
// known.
type undecidedCause uint8

const (
	causeWaitExpired undecidedCause = iota
	causeBufferFull
	causeShutdown
	numCauses
)

func (c undecidedCause) String() string {
	switch c {
	case causeWaitExpired:
		return "wait_expired"
	case causeBufferFull:
		return "buffer_full"
	default:
		return "shutdown"
	}
}

// tally counts the spans of one batch (or one tick) by outcome, so that the
// internal metrics are recorded once per batch rather than per span. Every
// span that comes in is, at any time, kept, dropped, held or undecided.
type tally struct {
	kept      [numReasons]int64
	dropped   int64
	held      int64 // the change in spans held
	undecided [numCauses]int64
	// sendFailed are spans the next consumer refused (sent again later).
	sendFailed int64
}

// telemetry records tallies; the metric attributes are built once.
type telemetry struct {
	tb          *metadata.TelemetryBuilder
	reasonAttrs [numReasons][]metric.AddOption
	causeAttrs  [numCauses][]metric.AddOption
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("create internal metrics: %w", err)
	}
	tm := &telemetry{tb: tb}
	for r := range numReasons {
		tm.reasonAttrs[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))}
	}
	for c := range numCauses {
		tm.causeAttrs[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", c.String())))}
	}
	return tm, nil
}

func (tm *telemetry) record(ctx context.Context, t *tally) {
	for r := range numReasons {
		if n := t.kept[r]; n > 0 {
			tm.tb.ProcessorStepSamplingSpansKept.Add(ctx, n, tm.reasonAttrs[r]...)
		}
	}
	if t.dropped > 0 {
		tm.tb.ProcessorStepSamplingSpansDropped.Add(ctx, t.dropped)
	}
	if t.held != 0 {
		tm.tb.ProcessorStepSamplingSpansHeld.Add(ctx, t.held)
	}
	if t.sendFailed > 0 {
		tm.tb.ProcessorStepSamplingSendFailed.Add(ctx, t.sendFailed)
	}
	for c := range numCauses {
		if n := t.undecided[c]; n > 0 {
			tm.tb.ProcessorStepSamplingSpansUndecided.Add(ctx, n, tm.causeAttrs[c]...)
		}
	}
}

func (tm *telemetry) shutdown() {
	tm.tb.Shutdown()
}
