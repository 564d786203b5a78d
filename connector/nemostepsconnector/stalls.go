// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// The stall detector (internal/stall) is the step engine's fourth user: it
// reads the same ranks (steps.Reader) and step spans (steps.Recognizer) as
// the step metrics, and sees every rank, before rank_strategy drops ranks.
// This file feeds it each rank's progress and turns what it finds into log
// records, gauges and the collector's own log and counters.

// Attribute names of the stall records and gauges.
const (
	attrEventName      = "event.name"
	attrStallKind      = "nemo.stall.kind"
	attrStallIteration = "nemo.stall.iteration"
	attrStallRanks     = "nemo.stall.culprit_ranks"
	attrStallHosts     = "nemo.stall.culprit_hosts"
	attrStallLostHosts = "nemo.stall.lost_hosts"
	attrStallSeconds   = "nemo.stall.seconds"
	attrStallStage     = "nemo.stall.first_stage"
	eventStalled       = "nemo.run.stalled"
	eventResumed       = "nemo.run.resumed"
	attrProcessPID     = "process.pid"
	attrServiceInst    = "service.instance.id"
)

// recordProgress feeds the detector one span of an identified rank; the
// rank is looked up once per resource, at the batch's time.
func (c *stepsConnector) recordProgress(r *resourceRank, s ptrace.Span, name string, step stepOf, isJob bool) {
	if !r.tracked {
		r.tracked = true
		host, process := processOf(r.attrs)
		id := stall.Rank{Rank: r.Rank.Rank, Host: host, Process: process, Stages: pipelineSize(r.attrs)}
		r.tracker = c.stalls.Rank(r.Group, int(r.WorldSize), id, c.batchTime)
	}
	if r.tracker.NeedsStage() {
		// Once per rank of a pipeline-parallel run: its stage is on its
		// spans, not its resource.
		if v, ok := s.Attributes().Get(attrkey.PipelineRank); ok {
			if stage, ok := rankattr.Parse(v); ok {
				r.tracker.SetStage(stage)
			}
		}
	}
	span := stall.Span{Name: name, Start: steps.Nanos(s.StartTimestamp()), End: steps.Nanos(s.EndTimestamp()), Job: isJob}
	if step.is {
		if !step.ok {
			return
		}
		span.Step, span.Iteration = true, step.iteration
		if r.tracker.Pipelined() {
			if v, ok := s.Attributes().Get(attrkey.MegatronNumMicrobatches); ok {
				if m, ok := rankattr.Parse(v); ok {
					span.MicroBatches = int(m)
				}
			}
		}
		if st := r.state; st != nil && st.labels != nil {
			c.runLabels.Put(r.Group, st.labels)
		}
	}
	r.tracker.Span(span)
}

// pipelineSize is the resource's pipeline-parallel size, 0 when it has none.
func pipelineSize(attrs pcommon.Map) int {
	if n, _, status := rankattr.Lookup(attrs, pipelineSizeKeys); status == rankattr.Valid {
		return int(min(n, math.MaxInt16))
	}
	return 0
}

// pipelineSizeKeys are where NeMo Lens puts the pipeline size: the newer
// spelling first.
var pipelineSizeKeys = []string{attrkey.PipelineSize, attrkey.LegacyPipelineSize}

// processOf is the resource's host and the identity of its process, which
// tells a restarted rank from the one before.
func processOf(attrs pcommon.Map) (host, process string) {
	if v, ok := attrs.Get(attrkey.HostName); ok {
		host = v.AsString()
	}
	if v, ok := attrs.Get(attrServiceInst); ok {
		process = v.AsString()
	} else if v, ok := attrs.Get(attrProcessPID); ok {
		process = host + "/" + v.AsString()
	}
	return host, process
}

// checkStalls judges every run at the tick: it returns the stall records to
// send, writes the gauges into c.out and logs and counts each change.
func (c *stepsConnector) checkStalls(t *tally) plog.Logs {
	if c.stalls == nil {
		return plog.Logs{}
	}
	now := c.clk.Now()
	events, stalled := c.stalls.Tick(now)
	ts := now.UnixNano()
	var logs plog.Logs
	for i := range events {
		ev := &events[i]
		labels, ok := c.runLabels.Get(ev.Run)
		if !ok {
			continue // a run that never completed a step cannot stall
		}
		if logs == (plog.Logs{}) {
			logs = plog.NewLogs()
		}
		c.stallRecord(logs, labels, ev, now)
		c.logStall(labels, ev)
		if ev.Stalled {
			t.stalls[kindIndex(ev.Kind)]++
			continue
		}
		// At the end of a stall every gauge of it goes to 0 once.
		c.out.runGauge(idRunStalled, labels, ts, 0, string(ev.Kind))
		for _, rank := range ev.Ranks() {
			if st, ok := c.ranks.Get(steps.Rank{Group: ev.Run, Rank: rank}); ok && st.labels != nil {
				c.out.gauge(idRankBehind, st.labels, ts, 0)
			}
		}
	}
	for _, s := range stalled {
		labels, ok := c.runLabels.Get(s.Run)
		if !ok {
			continue
		}
		c.out.runGauge(idRunStalled, labels, ts, 1, string(s.Kind))
		c.out.runGauge(idRunStallDuration, labels, ts, s.For.Seconds(), string(s.Kind))
		for _, rank := range s.Culprits {
			if st, ok := c.ranks.Get(steps.Rank{Group: s.Run, Rank: rank}); ok && st.labels != nil {
				c.out.gauge(idRankBehind, st.labels, ts, 1)
			}
		}
	}
	return logs
}

func kindIndex(k stall.Kind) int {
	if k == stall.Paused {
		return 1
	}
	return 0
}

// stallRecord appends one record of a stall's start or end, under a
// resource of the run's own attributes (so that jsonl_file writes it to the
// run's logs file, next to its traces).
func (*stepsConnector) stallRecord(logs plog.Logs, labels *rankLabels, ev *stall.Event, now time.Time) {
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
func (c *stepsConnector) logStall(labels *rankLabels, ev *stall.Event) {
	fields := []zap.Field{
		zap.String("run", runName(labels)), zap.String("kind", string(ev.Kind)),
		zap.Int64("iteration", ev.Iteration), zap.Duration("for", ev.For),
	}
	if !ev.Stalled {
		c.logger.Info("training run resumed", fields...)
		return
	}
	fields = append(fields, zap.Int64s("culprit_ranks", ev.Ranks()), zap.Strings("culprit_hosts", ev.Hosts()))
	if len(ev.LostHosts) > 0 {
		fields = append(fields, zap.Strings("lost_hosts", ev.LostHosts))
	}
	if ev.Pipeline.Found {
		fields = append(fields, zap.Int("first_stage", ev.Pipeline.Stage))
	}
	c.logger.Warn(stallMessage(runName(labels), ev), fields...)
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
	if ev.Kind == stall.Paused {
		fmt.Fprintf(&b, "run %s paused at iteration %d for %s: all %d ranks got as far as each other and no step completed (a checkpoint save, an evaluation, or a pause between steps); no rank is behind",
			run, ev.Iteration, formatSeconds(ev.For), ev.World)
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
