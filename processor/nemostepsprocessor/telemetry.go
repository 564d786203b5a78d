// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

// skipReason says why a step or wait span was not used.
// skipReasonNames are the reason attribute of spans_skipped.
var skipReasonNames = [steps.NumSkips]string{
	steps.SkipMissingRank:       "missing_rank",
	steps.SkipInvalidRank:       "invalid_rank",
	steps.SkipMissingIteration:  "missing_iteration",
	steps.SkipInvalidDuration:   "invalid_duration",
	steps.SkipLateWait:          "late_wait",
	steps.SkipWaitExpired:       "pending_expired",
	steps.SkipSummaryVersion:    "summary_version",
	steps.SkipSummaryUnreadable: "summary_unreadable",
}

var causeNames = [steps.NumCauses]string{
	steps.Complete:   "complete",
	steps.AtWait:     "decision_wait",
	steps.Early:      "early",
	steps.AtShutdown: "shutdown",
}

// tally counts what one batch or one tick did, so that the internal
// metrics are recorded once per batch rather than per span.
type tally struct {
	// engine is what the step engine did: spans skipped, steps decided,
	// ranks missing, the change in open rank steps.
	engine     steps.Stats
	dataPoints int64
	sendFailed int64
	stalls     stallCounts
}

// telemetry records the processor's own metrics; the attribute options are
// built once so that recording does not allocate.
type telemetry struct {
	tb          *metadata.TelemetryBuilder
	skipOpts    [steps.NumSkips][]metric.AddOption
	decidedOpts [steps.NumCauses][]metric.AddOption
	stallOpts   [3][]metric.AddOption
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("nemo_steps: create internal metrics: %w", err)
	}
	t := &telemetry{tb: tb}
	for r := range steps.NumSkips {
		t.skipOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", skipReasonNames[r])))}
	}
	for c := range steps.NumCauses {
		t.decidedOpts[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", causeNames[c])))}
	}
	for i, kind := range []string{string(stall.Behind), string(stall.Paused), string(stall.Wedged)} {
		t.stallOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind)))}
	}
	return t, nil
}

func (t *telemetry) record(ctx context.Context, n *tally) {
	for r, v := range n.engine.Skipped {
		if v > 0 {
			t.tb.ProcessorNemoStepsSpansSkipped.Add(ctx, v, t.skipOpts[r]...)
		}
	}
	for c, v := range n.engine.Decided {
		if v > 0 {
			t.tb.ProcessorNemoStepsStepsDecided.Add(ctx, v, t.decidedOpts[c]...)
		}
	}
	if n.engine.RanksMissing > 0 {
		t.tb.ProcessorNemoStepsRanksMissing.Add(ctx, n.engine.RanksMissing)
	}
	if n.engine.OpenRankSteps != 0 {
		t.tb.ProcessorNemoStepsOpenRankSteps.Add(ctx, n.engine.OpenRankSteps)
	}
	if n.dataPoints > 0 {
		t.tb.ProcessorNemoStepsDataPoints.Add(ctx, n.dataPoints)
	}
	if n.sendFailed > 0 {
		t.tb.ProcessorNemoStepsSendFailed.Add(ctx, n.sendFailed)
	}
	for i, v := range n.stalls {
		if v > 0 {
			t.tb.ProcessorNemoStepsStalls.Add(ctx, v, t.stallOpts[i]...)
		}
	}
}

func (t *telemetry) shutdown() {
	t.tb.Shutdown()
}
