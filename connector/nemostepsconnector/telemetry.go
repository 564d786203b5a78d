package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
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

// decideCause says why a step is decided when it is.
type decideCause uint8

const (
	decidedComplete   decideCause = iota // every rank of the world reported
	decidedAtWait                        // decision_wait is over
	decidedEarly                         // max_open_rank_steps was reached
	decidedAtShutdown                    // the collector stops
	numCauses
)

// causeNames are the values of the cause attribute (metadata.yaml).
var causeNames = [numCauses]string{
	decidedComplete:   "complete",
	decidedAtWait:     "decision_wait",
	decidedEarly:      "early",
	decidedAtShutdown: "shutdown",
}

// tally counts what one batch or one tick did, so that the internal
// metrics are recorded once per batch rather than per span.
type tally struct {
	skipped       [numSkipReasons]int64
	decided       [numCauses]int64
	ranksMissing  int64
	openRankSteps int64 // change
	dataPoints    int64
	sendFailed    int64
}

// telemetry records the connector's own metrics; the attribute options are
// built once so that recording does not allocate.
type telemetry struct {
	tb          *metadata.TelemetryBuilder
	skipOpts    [numSkipReasons][]metric.AddOption
	decidedOpts [numCauses][]metric.AddOption
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
	for c := range numCauses {
		t.decidedOpts[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", causeNames[c])))}
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
}

func (t *telemetry) shutdown() {
	t.tb.Shutdown()
}
