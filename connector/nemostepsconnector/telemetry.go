// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// skipReason says why a step or wait span was not used.
type skipReason uint8

const (
	skipNone skipReason = iota
	skipMissingRank
	skipInvalidRank
	skipMissingIteration
	skipInvalidDuration
	skipLateWait
	skipPendingExpired
	numSkipReasons
)

// skipReasonNames are the values of the reason attribute (metadata.yaml).
var skipReasonNames = [numSkipReasons]string{
	skipMissingRank:      "missing_rank",
	skipInvalidRank:      "invalid_rank",
	skipMissingIteration: "missing_iteration",
	skipInvalidDuration:  "invalid_duration",
	skipLateWait:         "late_wait",
	skipPendingExpired:   "pending_expired",
}

// causeNames are the values of the cause attribute (metadata.yaml).
var causeNames = [steps.NumCauses]string{
	steps.Complete:   "complete",
	steps.AtWait:     "decision_wait",
	steps.Early:      "early",
	steps.AtShutdown: "shutdown",
}

// tally counts what one batch or one tick did, so that the internal
// metrics are recorded once per batch rather than per span.
type tally struct {
	skipped       [numSkipReasons]int64
	decided       [steps.NumCauses]int64
	ranksMissing  int64
	openRankSteps int64 // change
	dataPoints    int64
	sendFailed    int64
	stalls        [2]int64 // by kind: behind, paused
}

// telemetry records the connector's own metrics; the attribute options are
// built once so that recording does not allocate.
type telemetry struct {
	tb          *metadata.TelemetryBuilder
	skipOpts    [numSkipReasons][]metric.AddOption
	decidedOpts [steps.NumCauses][]metric.AddOption
	stallOpts   [2][]metric.AddOption
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("nemo_steps: create internal metrics: %w", err)
	}
	t := &telemetry{tb: tb}
	for r := skipMissingRank; r < numSkipReasons; r++ {
		t.skipOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", skipReasonNames[r])))}
	}
	for c := range steps.NumCauses {
		t.decidedOpts[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", causeNames[c])))}
	}
	for i, kind := range []string{"behind", "paused"} {
		t.stallOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind)))}
	}
	return t, nil
}

func (t *telemetry) record(ctx context.Context, n *tally) {
	for r, v := range n.skipped {
		if v > 0 {
			t.tb.ConnectorNemoStepsSpansSkipped.Add(ctx, v, t.skipOpts[r]...)
		}
	}
	for c, v := range n.decided {
		if v > 0 {
			t.tb.ConnectorNemoStepsStepsDecided.Add(ctx, v, t.decidedOpts[c]...)
		}
	}
	if n.ranksMissing > 0 {
		t.tb.ConnectorNemoStepsRanksMissing.Add(ctx, n.ranksMissing)
	}
	if n.openRankSteps != 0 {
		t.tb.ConnectorNemoStepsOpenRankSteps.Add(ctx, n.openRankSteps)
	}
	if n.dataPoints > 0 {
		t.tb.ConnectorNemoStepsDataPoints.Add(ctx, n.dataPoints)
	}
	if n.sendFailed > 0 {
		t.tb.ConnectorNemoStepsSendFailed.Add(ctx, n.sendFailed)
	}
	for i, v := range n.stalls {
		if v > 0 {
			t.tb.ConnectorNemoStepsStalls.Add(ctx, v, t.stallOpts[i]...)
		}
	}
}

func (t *telemetry) shutdown() {
	t.tb.Shutdown()
}
