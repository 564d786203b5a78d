// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadata"
)

// signalKey is the metric attribute naming the signal of the counted items.
// The collector (v0.161.0) does not add otelcol.signal to a component's own
// metrics unless the alpha feature gate telemetry.newPipelineTelemetry is
// on, and then only as a scope attribute, so it is set here, under the key
// processorhelper uses for the same purpose.
const signalKey = "otel.signal"

// tally counts the items of one batch (or one straggler tick) by outcome and
// reason, so that the internal metrics are recorded once per batch rather
// than per resource.
type tally struct {
	kept, dropped [numReasons]int64

	// Straggler buffer: the change in spans held, and its counters.
	held           int64
	stepsDecided   int64
	stragglersKept int64
	earlyDecisions int64
	lateSpans      int64
	cacheHits      int64
	sendFailed     int64
	ranksMissing   int64
	summaries      int64
}

// rankStrategyTelemetry records the processor's own metrics.
type rankStrategyTelemetry struct {
	telemetryBuilder *metadata.TelemetryBuilder
	// reasonAttrs are the metric attributes (signal, reason), built once and
	// passed as ready slices so that recording does not allocate.
	reasonAttrs [numReasons][]metric.AddOption
}

func newRankStrategyTelemetry(set component.TelemetrySettings, signal pipeline.Signal) (*rankStrategyTelemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("create internal metrics: %w", err)
	}
	rt := &rankStrategyTelemetry{telemetryBuilder: tb}
	for r := range numReasons {
		rt.reasonAttrs[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String(signalKey, signal.String()),
			attribute.String("reason", r.String()),
		))}
	}
	return rt, nil
}

// record adds one tally to the counters, skipping those it left at zero.
func (rt *rankStrategyTelemetry) record(ctx context.Context, t *tally) {
	tb := rt.telemetryBuilder
	for r := range numReasons {
		if n := t.kept[r]; n > 0 {
			tb.ProcessorRankStrategyItemsKept.Add(ctx, n, rt.reasonAttrs[r]...)
		}
		if n := t.dropped[r]; n > 0 {
			tb.ProcessorRankStrategyItemsDropped.Add(ctx, n, rt.reasonAttrs[r]...)
		}
	}
	if t.held != 0 {
		tb.ProcessorRankStrategyStragglersSpansHeld.Add(ctx, t.held)
	}
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersStepsDecided, t.stepsDecided)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersKept, t.stragglersKept)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersEarlyDecisions, t.earlyDecisions)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersLateSpans, t.lateSpans)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersDecisionCacheHits, t.cacheHits)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersSendFailed, t.sendFailed)
	addIfAny(ctx, tb.ProcessorRankStrategyStragglersRanksMissing, t.ranksMissing)
	addIfAny(ctx, tb.ProcessorRankStrategySummaries, t.summaries)
}

func addIfAny(ctx context.Context, c metric.Int64Counter, n int64) {
	if n > 0 {
		c.Add(ctx, n)
	}
}

func (rt *rankStrategyTelemetry) shutdown() {
	rt.telemetryBuilder.Shutdown()
}
