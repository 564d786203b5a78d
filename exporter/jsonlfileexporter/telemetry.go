// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
)

// fileOp names a file operation in the errors metric and in logs.
type fileOp int

const (
	opOpen fileOp = iota
	opWrite
	opSync
	opRotate
	opClose
	numFileOps
)

func (o fileOp) String() string {
	switch o {
	case opOpen:
		return "open"
	case opWrite:
		return "write"
	case opSync:
		return "sync"
	case opRotate:
		return "rotate"
	default:
		return "close"
	}
}

// telemetry records the exporter's internal metrics. The attribute options
// are built once so that recording costs no allocation.
type telemetry struct {
	tb     *metadata.TelemetryBuilder
	opErr  [numFileOps]metric.AddOption
	pruned [numPruneReasons]metric.AddOption
}

func newTelemetry(tb *metadata.TelemetryBuilder) *telemetry {
	t := &telemetry{tb: tb}
	for op := range numFileOps {
		t.opErr[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op.String())))
	}
	for r := range numPruneReasons {
		t.pruned[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	return t
}

// pruneReason says why retention removed a rotated file.
type pruneReason uint8

const (
	pruneMaxBackups pruneReason = iota
	pruneMaxDays
	numPruneReasons
)

func (r pruneReason) String() string {
	if r == pruneMaxDays {
		return "max_days"
	}
	return "max_backups"
}

// prunedFile counts a rotated file retention removed.
func (t *telemetry) prunedFile(r pruneReason) {
	t.tb.ExporterJsonlFileFilesPruned.Add(context.Background(), 1, t.pruned[r])
}

func (t *telemetry) written(records, bytes int) {
	ctx := context.Background()
	if records > 0 {
		t.tb.ExporterJsonlFileRecordsWritten.Add(ctx, int64(records))
	}
	if bytes > 0 {
		t.tb.ExporterJsonlFileBytesWritten.Add(ctx, int64(bytes))
	}
}

func (t *telemetry) synced() {
	t.tb.ExporterJsonlFileFsyncs.Add(context.Background(), 1)
}

func (t *telemetry) overflowed(records int) {
	t.tb.ExporterJsonlFileOverflowRecords.Add(context.Background(), int64(records))
}

func (t *telemetry) rotated() {
	t.tb.ExporterJsonlFileRotations.Add(context.Background(), 1)
}

func (t *telemetry) failed(op fileOp) {
	t.tb.ExporterJsonlFileErrors.Add(context.Background(), 1, t.opErr[op])
}
