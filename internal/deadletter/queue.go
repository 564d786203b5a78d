// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter // import "github.com/nemo-lens/otelcol-nemo/internal/deadletter"

import (
	"context"

	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// queueLosses are the messages exporterhelper's persistent queue logs when
// it deletes an item it could not read (a damaged or incompatible queue
// file, a storage read error): "Failed to dispatch item" at DEBUG, the
// others at WARN, none counted.
var queueLosses = map[string]bool{
	"Failed to dispatch item":   true,
	"Failed retrieving item":    true,
	"Failed unmarshalling item": true,
}

// QueueLogger is the logger to give exporterhelper (its exporter.Settings'
// Logger) so that an item its persistent queue loses is logged at ERROR,
// saying so, and counted with lost.
//
// Why by hand: exporterhelper's queue has no hook and no metric for an
// item it cannot read; its log line is the only trace, at DEBUG for the
// commonest case.
func QueueLogger(logger *zap.Logger, lost func()) *zap.Logger {
	return logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return queueLossCore{Core: c, lost: lost} }))
}

type queueLossCore struct {
	zapcore.Core
	lost func()
}

// Enabled lets DEBUG entries through to Check, where all but the queue's
// losses are left to the wrapped core's level.
func (c queueLossCore) Enabled(l zapcore.Level) bool {
	return l == zapcore.DebugLevel || c.Core.Enabled(l)
}

func (c queueLossCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if queueLosses[e.Message] {
		c.lost()
		e.Message = "An item of the persistent queue could not be read and is lost (" + e.Message +
			"): the queue's file is damaged or was written by an incompatible release; it was acknowledged, so the ranks will not send it again"
		e.Level = zapcore.ErrorLevel
		return c.Core.Check(e, ce)
	}
	if !c.Core.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c queueLossCore) With(fields []zapcore.Field) zapcore.Core {
	return queueLossCore{Core: c.Core.With(fields), lost: c.lost}
}

// QueueSettings is set for exporterhelper: its Logger a QueueLogger
// counting each loss in counter (an exporter's mdatagen metric, attribute
// exporter).
func QueueSettings(set exporter.Settings, counter metric.Int64Counter) exporter.Settings {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", set.ID.String())))
	set.Logger = QueueLogger(set.Logger, func() { counter.Add(context.Background(), 1, attrs) })
	return set
}
