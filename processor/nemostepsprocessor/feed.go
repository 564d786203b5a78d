// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// feed is one thing nemo_steps makes of the step engine's calls: the step
// metrics (metrics.go), the stall detector (stalls.go), goodput
// (goodput.go). The processor lists the feeds the config turns on and
// hands each engine call to all of them, in that order. Called under the
// engine's lock.
type feed interface {
	// resource is a resource of an identified rank of run, about to be
	// walked: what the feed looked up of the one before is stale.
	resource(run *runState, r *steps.Resource)
	// arrived is one span of the resource, with what the engine recognized
	// in it.
	arrived(run *runState, r *steps.Resource, s ptrace.Span, step steps.StepSpan)
	// decided is a step the engine decided.
	decided(d *steps.Decision[none])
	// tick is the engine's tick (final: the last, at shutdown). A feed
	// writes its points to the processor's pointWriter and what it hands
	// on into t: the feeds after it read it.
	tick(now time.Time, final bool, t *tickOut)
}

// tickOut is what the feeds found at one tick, besides their points.
type tickOut struct {
	// logs are the records to send (stall and goodput records).
	logs plog.Logs
	// stalled counts the stalls found; events are the stall detector's
	// changes, which goodput accounts as stalled time.
	stalled stallCounts
	events  []stall.Event
}

// addLogs appends a feed's records.
func (t *tickOut) addLogs(logs plog.Logs) {
	if logs == (plog.Logs{}) {
		return
	}
	if t.logs == (plog.Logs{}) {
		t.logs = logs
		return
	}
	logs.ResourceLogs().MoveAndAppendTo(t.logs.ResourceLogs())
}

// stallCounts are the stalls found, by kind: behind, paused, wedged.
type stallCounts [3]int64

// none is what the processor remembers of a decided step: nothing.
type none = struct{}
