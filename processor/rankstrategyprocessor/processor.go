// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"
)

// rankStrategyProcessor filters one signal's batches by rank.
type rankStrategyProcessor struct {
	selector       *rankSelector
	keepErrors     bool
	minLogSeverity plog.SeverityNumber
	telemetry      *rankStrategyTelemetry
	// stragglers is straggler retention (traces, when the stragglers block
	// is enabled and the strategy drops ranks), nil otherwise.
	stragglers *stragglers.Buffer
}

func newRankStrategyProcessor(set processor.Settings, cfg *Config, signal pipeline.Signal) (*rankStrategyProcessor, error) {
	selector, err := newRankSelector(cfg, set.Logger)
	if err != nil {
		return nil, fmt.Errorf("rank_strategy: %w", err)
	}
	minSeverity, err := parseSeverity(cfg.KeepLogSeverity)
	if err != nil {
		return nil, fmt.Errorf("rank_strategy: keep_log_severity: %w", err)
	}
	tel, err := newRankStrategyTelemetry(set.TelemetrySettings, signal)
	if err != nil {
		return nil, fmt.Errorf("rank_strategy: %w", err)
	}
	return &rankStrategyProcessor{
		selector:       selector,
		keepErrors:     cfg.KeepErrors,
		minLogSeverity: minSeverity,
		telemetry:      tel,
	}, nil
}

// enableStragglers attaches the straggler buffer to a traces processor. Kept
// straggler spans are passed to next from the buffer's own ticker.
func (p *rankStrategyProcessor) enableStragglers(cfg *Config, set processor.Settings, next consumer.Traces, clk clock.Clock) error {
	sc := cfg.Stragglers.Get()
	if sc == nil {
		return nil
	}
	if cfg.Strategy == StrategyAllRanks {
		if sc.Summarize {
			set.Logger.Info("strategy all_ranks: every span of every rank goes on, so no rank is summarized and no straggler step is held here")
			return nil
		}
		set.Logger.Warn("stragglers is enabled but strategy all_ranks drops no rank, so there is nothing to hold",
			zap.String("fix", "remove the stragglers block, or choose a strategy that drops ranks"))
		return nil
	}
	if len(cfg.RankKeys) == 0 {
		return errors.New("rank_strategy: stragglers: rank_keys must list at least one attribute key, to tell the ranks of a step apart")
	}
	b, err := stragglers.New(&stragglers.Config{
		Settings: sc.Settings, Waits: sc.Waits,
		MaxRanksPerStep: sc.MaxRanksPerStep, MaxBufferedSpans: sc.MaxBufferedSpans, DecisionCacheSize: sc.DecisionCacheSize,
		Exceptional: isExceptional, Summarize: sc.Summarize, ProgressInterval: sc.ProgressInterval,
		IdentityKeys: slices.Concat(stepsummary.IdentityKeys, cfg.RankKeys, cfg.WorldSizeKeys, cfg.LocalRankKeys, cfg.GroupKeys),
	}, clk, set.Logger, next, p.recordStragglers)
	if err != nil {
		return fmt.Errorf("rank_strategy: %w", err)
	}
	p.stragglers = b
	return nil
}

// recordStragglers counts what straggler retention did.
func (p *rankStrategyProcessor) recordStragglers(ctx context.Context, st *stragglers.Tally) {
	t := tally{
		held: st.Held, stepsDecided: st.StepsDecided, stragglersKept: st.StragglersKept, earlyDecisions: st.EarlyDecisions,
		lateSpans: st.LateSpans, cacheHits: st.CacheHits, sendFailed: st.SendFailed, ranksMissing: st.RanksMissing,
	}
	t.kept[reasonStraggler] = st.Kept
	t.dropped[reasonNotSelected] = st.Dropped
	t.summaries = st.Summaries
	p.telemetry.record(ctx, &t)
}

func (p *rankStrategyProcessor) start(context.Context, component.Host) error {
	if p.stragglers != nil {
		p.stragglers.Start()
	}
	return nil
}

func (p *rankStrategyProcessor) shutdown(context.Context) error {
	var err error
	if p.stragglers != nil {
		if err = p.stragglers.Shutdown(); err != nil {
			err = fmt.Errorf("rank_strategy: %w", err)
		}
	}
	p.telemetry.shutdown()
	return err
}

func (p *rankStrategyProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	// Selection first, outside the straggler buffer's lock; then one call
	// into the buffer, which holds and observes what selection chose.
	pooled := choicePool.Get().(*[]choice)
	choices := p.choose(td, (*pooled)[:0])
	defer func() {
		clear(choices)
		*pooled = choices[:0]
		choicePool.Put(pooled)
	}()
	var t tally
	if p.stragglers == nil || !p.stragglers.Consume(ctx, func(b *stragglers.Batch) { p.apply(td, choices, &t, b) }) {
		// No straggler retention, or it is shut down: the strategy alone.
		p.apply(td, choices, &t, nil)
	}
	p.telemetry.record(ctx, &t)
	if td.ResourceSpans().Len() == 0 {
		return td, processorhelper.ErrSkipProcessingData
	}
	if p.stragglers != nil && p.stragglers.Full() {
		// The kept straggler spans cannot be passed on: refuse, retryably,
		// rather than take more than can be kept.
		return td, stragglers.ErrFull
	}
	return td, nil
}

// choice is the strategy's verdict on one resource of a batch, and, with
// straggler retention, the rank's identity it reads the resource under.
type choice struct {
	verdict verdict
	id      steps.Identity
	hasID   bool
}

// choicePool keeps the choices of a batch between batches: a batch
// allocates nothing for them.
var choicePool = sync.Pool{New: func() any { return new([]choice) }}

// choose appends to out the choice on every resource of the batch, in
// order, without changing the batch or touching the straggler buffer.
func (p *rankStrategyProcessor) choose(td ptrace.Traces, out []choice) []choice {
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		attrs := rss.At(i).Resource().Attributes()
		c := choice{verdict: p.selector.decide(attrs)}
		if p.stragglers != nil {
			c.id, c.hasID = p.selector.identity(attrs, c.verdict)
		}
		out = append(out, c)
	}
	return out
}

// apply carries the choices out: kept resources pass (with straggler
// retention, b, their step times are read), the dropped ranks' are held for
// their steps' decisions (b) or dropped, keeping what keep_errors keeps,
// and agents' step summaries are read and taken out.
func (p *rankStrategyProcessor) apply(td ptrace.Traces, choices []choice, t *tally, b *stragglers.Batch) {
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		c := choices[i]
		i++
		if stepsummary.Has(rs) && takeSummaries(rs, c, b) {
			return true
		}
		if c.verdict.keep {
			t.kept[c.verdict.reason] += int64(pdatautil.CountSpans(rs))
			if b != nil && c.hasID {
				b.ObserveKept(rs, c.id)
			}
			return false
		}
		if b != nil && c.verdict.reason == reasonNotSelected && c.hasID {
			return p.hold(b, rs, c.id, t)
		}
		if p.keepErrors {
			return !keepExceptionalSpans(rs, c.verdict.reason, t)
		}
		t.dropped[c.verdict.reason] += int64(pdatautil.CountSpans(rs))
		return true
	})
}

// takeSummaries takes the step summaries an agent sent of the ranks it
// dropped (internal/stepsummary) out of the resource: on a gateway with
// straggler retention they count in their steps' scores like the spans of
// the ranks they stand for; they are never passed on (they are not
// telemetry of the job). It reports whether the resource is left empty.
func takeSummaries(rs ptrace.ResourceSpans, c choice, b *stragglers.Batch) bool {
	// An agent sends its summaries in resources of their own: read in
	// place. A resource that also holds spans gives its summaries up to a
	// resource of their own first, so that its spans are read once, below.
	summaries, only := rs, stepsummary.Only(rs)
	if !only {
		summaries = ptrace.NewResourceSpans()
		rs.Resource().CopyTo(summaries.Resource())
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			if !stepsummary.IsScope(ss) {
				return false
			}
			ss.MoveTo(summaries.ScopeSpans().AppendEmpty())
			return true
		})
	}
	if b != nil && c.hasID {
		b.ObserveKept(summaries, c.id)
	}
	return only || rs.ScopeSpans().Len() == 0
}

// hold has straggler retention hold the resource of a dropped rank: its
// spans wait for their step's decision instead of being dropped. Spans
// keep_errors keeps stay in the batch, read by the buffer in a copy of the
// resource. It says whether the resource leaves the batch.
func (p *rankStrategyProcessor) hold(b *stragglers.Batch, rs ptrace.ResourceSpans, id steps.Identity, t *tally) bool {
	exceptional := false
	if p.keepErrors {
		_, exceptional = scanExceptionalSpans(rs)
	}
	if !exceptional {
		b.Hold(rs, id, false)
		return true
	}
	// Rare: the batch keeps the exceptional spans, the buffer holds a copy
	// of the resource in which they are read, never held.
	src := ptrace.NewResourceSpans()
	rs.CopyTo(src)
	filterExceptionalSpans(rs, t, nil)
	b.Hold(src, id, true)
	return false
}

func (p *rankStrategyProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	var t tally
	// Metrics have no error status or severity: a dropped rank's resource
	// always goes whole.
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		v := p.selector.decide(rm.Resource().Attributes())
		if v.keep {
			t.kept[v.reason] += int64(pdatautil.CountDataPoints(rm))
			return false
		}
		t.dropped[v.reason] += int64(pdatautil.CountDataPoints(rm))
		return true
	})
	p.telemetry.record(ctx, &t)
	if md.ResourceMetrics().Len() == 0 {
		return md, processorhelper.ErrSkipProcessingData
	}
	return md, nil
}

func (p *rankStrategyProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	var t tally
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		v := p.selector.decide(rl.Resource().Attributes())
		if v.keep {
			t.kept[v.reason] += int64(pdatautil.CountLogRecords(rl))
			return false
		}
		if p.keepErrors {
			return !p.keepSevereLogs(rl, v.reason, &t)
		}
		t.dropped[v.reason] += int64(pdatautil.CountLogRecords(rl))
		return true
	})
	p.telemetry.record(ctx, &t)
	if ld.ResourceLogs().Len() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// isExceptional: keep_errors keeps the span whatever its rank.
func isExceptional(s ptrace.Span) bool {
	_, ok := spanKeepReason(s)
	return ok
}

// spanKeepReason says whether a span from a dropped rank is kept anyway:
// status ERROR first, then nemo.span.truncated. It only reads the status
// code and looks up one attribute.
func spanKeepReason(s ptrace.Span) (reason, bool) {
	if s.Status().Code() == ptrace.StatusCodeError {
		return reasonError, true
	}
	if pdatautil.Truncated(s) {
		return reasonTruncated, true
	}
	if keptAsStraggler(s) {
		return reasonStraggler, true
	}
	return 0, false
}

// keptAsStraggler: an agent in front (summarize) kept the span's step as a
// straggler; its verdict stands, so that a gateway does not drop what the
// agent kept.
func keptAsStraggler(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(attrkey.KeptReason)
	return ok && v.Str() == attrkey.KeptStraggler
}

// keepExceptionalSpans handles a resource of a dropped rank when keep_errors
// is on. A first read-only pass looks for a span worth keeping; in the common
// case there is none and the resource is dropped whole, unmodified. Otherwise
// only those spans are kept, each marked with attrkey.KeptReason. It reports
// whether anything was kept.
func keepExceptionalSpans(rs ptrace.ResourceSpans, dropReason reason, t *tally) bool {
	total, found := scanExceptionalSpans(rs)
	if !found {
		t.dropped[dropReason] += int64(total)
		return false
	}
	filterExceptionalSpans(rs, t, &t.dropped[dropReason])
	return true
}

// scanExceptionalSpans counts the resource's spans and reports whether one is
// worth keeping, without modifying anything.
func scanExceptionalSpans(rs ptrace.ResourceSpans) (total int, found bool) {
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		total += spans.Len()
		for j := 0; !found && j < spans.Len(); j++ {
			_, found = spanKeepReason(spans.At(j))
		}
	}
	return total, found
}

// filterExceptionalSpans removes every span not worth keeping, counting it in
// dropped unless that is nil (the straggler buffer holds a copy of them), and
// marks and counts the others.
func filterExceptionalSpans(rs ptrace.ResourceSpans, t *tally, dropped *int64) {
	rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(func(s ptrace.Span) bool {
			r, keep := spanKeepReason(s)
			if !keep {
				if dropped != nil {
					*dropped++
				}
				return true
			}
			s.Attributes().PutStr(attrkey.KeptReason, r.String())
			t.kept[r]++
			return false
		})
		return ss.Spans().Len() == 0
	})
}

// logSeverity is the record's severity number, or, when the sender left it
// unspecified, the number its severity text names.
func logSeverity(lr plog.LogRecord) plog.SeverityNumber {
	if sn := lr.SeverityNumber(); sn != plog.SeverityNumberUnspecified {
		return sn
	}
	if text := lr.SeverityText(); text != "" {
		if sn, ok := severityFromText(text); ok {
			return sn
		}
	}
	return plog.SeverityNumberUnspecified
}

// keepSevereLogs is keepExceptionalSpans for log records: those at or above
// keep_log_severity are kept, marked with attrkey.KeptReason.
func (p *rankStrategyProcessor) keepSevereLogs(rl plog.ResourceLogs, dropReason reason, t *tally) bool {
	total, found := 0, false
	sls := rl.ScopeLogs()
	for i := 0; i < sls.Len(); i++ {
		records := sls.At(i).LogRecords()
		total += records.Len()
		for j := 0; !found && j < records.Len(); j++ {
			found = logSeverity(records.At(j)) >= p.minLogSeverity
		}
	}
	if !found {
		t.dropped[dropReason] += int64(total)
		return false
	}
	sls.RemoveIf(func(sl plog.ScopeLogs) bool {
		sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
			if logSeverity(lr) < p.minLogSeverity {
				t.dropped[dropReason]++
				return true
			}
			lr.Attributes().PutStr(attrkey.KeptReason, reasonSeverity.String())
			t.kept[reasonSeverity]++
			return false
		})
		return sl.LogRecords().Len() == 0
	})
	return true
}
