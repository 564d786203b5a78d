// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"context"
	"fmt"

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
)

// rankStrategyProcessor filters one signal's batches by rank.
type rankStrategyProcessor struct {
	selector       *rankSelector
	keepErrors     bool
	minLogSeverity plog.SeverityNumber
	telemetry      *rankStrategyTelemetry
	// stragglers is the step-level straggler buffer (traces, when the
	// stragglers block is enabled and the strategy drops ranks), nil
	// otherwise.
	stragglers *stragglerBuffer
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
		set.Logger.Warn("stragglers is enabled but strategy all_ranks drops no rank, so there is nothing to hold",
			zap.String("fix", "remove the stragglers block, or choose a strategy that drops ranks"))
		return nil
	}
	b, err := newStragglerBuffer(sc, &cfg.Keys, p.selector.reader, clk, set.Logger, next, p.telemetry.record)
	if err != nil {
		return fmt.Errorf("rank_strategy: %w", err)
	}
	p.stragglers = b
	return nil
}

func (p *rankStrategyProcessor) start(context.Context, component.Host) error {
	if p.stragglers != nil {
		p.stragglers.start()
	}
	return nil
}

func (p *rankStrategyProcessor) shutdown(ctx context.Context) error {
	var err error
	if p.stragglers != nil {
		err = p.stragglers.shutdown(ctx)
	}
	p.telemetry.shutdown()
	return err
}

func (p *rankStrategyProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	var t tally
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		v := p.selector.decide(rs.Resource().Attributes())
		if v.keep {
			t.kept[v.reason] += int64(pdatautil.CountSpans(rs))
			if p.stragglers != nil {
				p.stragglers.observeKept(rs, &t)
			}
			return false
		}
		if p.stragglers != nil && v.reason == reasonNotSelected {
			// Held for the step decision instead of dropped; keep_errors
			// spans stay in the batch.
			if handled, remove := p.stragglers.hold(rs, p.keepErrors, &t); handled {
				return remove
			}
		}
		if p.keepErrors {
			return !keepExceptionalSpans(rs, v.reason, &t)
		}
		t.dropped[v.reason] += int64(pdatautil.CountSpans(rs))
		return true
	})
	p.telemetry.record(ctx, &t)
	if td.ResourceSpans().Len() == 0 {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
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
	return 0, false
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
