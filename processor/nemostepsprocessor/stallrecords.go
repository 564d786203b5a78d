// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

// stallRecord appends one record of a stall's start or end, under a
// resource of the run's own attributes (so that jsonl_file writes it to the
// run's logs file, next to its traces).
func stallRecord(logs plog.Logs, labels *rankLabels, ev *stall.Event, now time.Time) {
	rl := logs.ResourceLogs().AppendEmpty()
	attrs := rl.Resource().Attributes()
	if labels.service != "" {
		attrs.PutStr(attrkey.ServiceName, labels.service)
	}
	putLabels(attrs, labels.group)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	rec := sl.LogRecords().AppendEmpty()
	rec.SetTimestamp(pcommon.NewTimestampFromTime(now))
	rec.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
	ra := rec.Attributes()
	putLabels(ra, labels.group)
	ra.PutStr(attrStallKind, string(ev.Kind))
	ra.PutInt(attrStallIteration, ev.Iteration)
	ra.PutDouble(attrStallSeconds, roundSeconds(ev.For))
	if ev.Stalled {
		rec.SetSeverityNumber(plog.SeverityNumberWarn)
		rec.SetSeverityText("WARN")
		ra.PutStr(attrEventName, eventStalled)
		ranks := ra.PutEmptySlice(attrStallRanks)
		for _, r := range ev.Ranks() {
			ranks.AppendEmpty().SetInt(r)
		}
		hosts := ra.PutEmptySlice(attrStallHosts)
		for _, h := range ev.Hosts() {
			hosts.AppendEmpty().SetStr(h)
		}
		if len(ev.LostHosts) > 0 {
			lost := ra.PutEmptySlice(attrStallLostHosts)
			for _, h := range ev.LostHosts {
				lost.AppendEmpty().SetStr(h)
			}
		}
		if ev.Pipeline.Found {
			ra.PutInt(attrStallStage, int64(ev.Pipeline.Stage))
		}
		rec.Body().SetStr(stallMessage(runName(labels), ev))
		return
	}
	rec.SetSeverityNumber(plog.SeverityNumberInfo)
	rec.SetSeverityText("INFO")
	ra.PutStr(attrEventName, eventResumed)
	rec.Body().SetStr(fmt.Sprintf("run %s resumed: a step completed after %s without one (stalled at iteration %d, %s)",
		runName(labels), formatSeconds(ev.For), ev.Iteration, ev.Kind))
}

// logStall writes the collector's own log line of a change.
func logStall(logger *zap.Logger, labels *rankLabels, ev *stall.Event) {
	fields := []zap.Field{
		zap.String("run", runName(labels)), zap.String("kind", string(ev.Kind)),
		zap.Int64("iteration", ev.Iteration), zap.Duration("for", ev.For),
	}
	if !ev.Stalled {
		logger.Info("training run resumed", fields...)
		return
	}
	fields = append(fields, zap.Int64s("culprit_ranks", ev.Ranks()), zap.Strings("culprit_hosts", ev.Hosts()))
	if len(ev.LostHosts) > 0 {
		fields = append(fields, zap.Strings("lost_hosts", ev.LostHosts))
	}
	if ev.Pipeline.Found {
		fields = append(fields, zap.Int("first_stage", ev.Pipeline.Stage))
	}
	logger.Warn(stallMessage(runName(labels), ev), fields...)
}

// runName is the run's nemo.run.id (or its first group attribute).
func runName(l *rankLabels) string {
	for _, g := range l.group {
		if g.key == attrkey.RunID {
			return g.value()
		}
	}
	if len(l.group) > 0 {
		return l.group[0].value()
	}
	return "(no run id)"
}

func (l label) value() string {
	if l.isNum {
		return strconv.FormatInt(l.num, 10)
	}
	return l.str
}

// stallMessage is a stall's body: who stopped where, and what the others do.
func stallMessage(run string, ev *stall.Event) string {
	var b strings.Builder
	switch ev.Kind {
	case stall.Paused:
		fmt.Fprintf(&b, "run %s paused at iteration %d for %s: all %d ranks got as far as each other and no step completed (a checkpoint save, an evaluation, or a pause between steps); no rank is behind",
			run, ev.Iteration, formatSeconds(ev.For), ev.World)
		return b.String()
	case stall.Wedged:
		fmt.Fprintf(&b, "run %s wedged at iteration %d for %s: all %d ranks finished %s and none finished the collective it started: a collective that never completes (a network or NCCL fault); no rank is behind",
			run, ev.Iteration, formatSeconds(ev.For), ev.World, ev.Others)
		return b.String()
	}
	fmt.Fprintf(&b, "run %s stalled at iteration %d for %s: ", run, ev.Iteration, formatSeconds(ev.For))
	if p := ev.Pipeline; p.Found {
		fmt.Fprintf(&b, "pipeline stage %d of %d stopped first (it ended the forward of %d of its %d micro-batches and the backward of %d, and had the input of its next compute): ",
			p.Stage, p.Stages, p.Forwards, p.MicroBatches, p.Backwards)
	}
	const named = 5
	for i, c := range ev.Culprits {
		if i == named {
			fmt.Fprintf(&b, "; and %d more ranks", len(ev.Culprits)-named)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "rank %d", c.Rank.Rank)
		if c.Host != "" {
			fmt.Fprintf(&b, " on %s", c.Host)
		}
		if c.LastSpan == "" {
			b.WriteString(" sent nothing since the last completed step")
		} else {
			fmt.Fprintf(&b, " last finished %s at %s", c.LastSpan, c.LastEnd.UTC().Format(time.RFC3339Nano))
		}
	}
	if len(ev.LostHosts) > 0 {
		fmt.Fprintf(&b, "; every rank of %s is behind (a lost node?)", strings.Join(ev.LostHosts, ", "))
	}
	others := ev.OthersCount
	if p := ev.Pipeline; p.Found && p.Waiting > 0 {
		fmt.Fprintf(&b, "; the other %d ranks of its pipeline wait for it in their point-to-point transfers (the later stages for its forwards, the earlier ones for its backwards)", p.Waiting)
		others -= p.Waiting
	}
	if others > 0 {
		fmt.Fprintf(&b, "; the other %d ranks finished %s and wait", others, ev.Others)
		if p := stall.PhaseOf(ev.Others); p >= stall.PhaseComputeDone && p < stall.PhaseOptimizer {
			b.WriteString(" in grad sync")
		}
	}
	return b.String()
}

func roundSeconds(d time.Duration) float64 { return float64(d.Round(100*time.Millisecond)) / 1e9 }

func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(roundSeconds(d), 'f', -1, 64) + " s"
}
