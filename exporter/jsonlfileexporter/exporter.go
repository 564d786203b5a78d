// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
)

// jsonlExporter is shared by the traces, metrics and logs exporters built
// from one configuration (internal/sharedcomponent), so that signals whose
// paths resolve to the same file write through one handle, and the files
// are closed only after the last of them has shut down (and drained its
// queue).
type jsonlExporter struct {
	writer   *fileWriter
	fallback string
	logger   *zap.Logger
	// batches keeps the buffers records are encoded into, so that encoding
	// a batch allocates nothing once they are warm. Not a sync.Pool: that
	// drops its contents at every garbage collection, and re-growing
	// multi-megabyte buffers then dominated the exporter's CPU under load.
	batches chan *batch
}

func newJSONLExporter(cfg *Config, logger *zap.Logger) (*jsonlExporter, error) {
	set, err := newFileWriterSettings(cfg)
	if err != nil {
		return nil, err
	}
	w, err := newFileWriter(set, logger)
	if err != nil {
		return nil, err
	}
	e := &jsonlExporter{writer: w, fallback: cfg.MissingAttributeValue, logger: logger}
	e.batches = make(chan *batch, maxIdleBatches)
	return e, nil
}

// Start creates the directory and starts the writer's flushing.
func (e *jsonlExporter) Start(context.Context, component.Host) error {
	// The directory is created here so that a mistake shows at start; a
	// failure is not fatal, since the directory may appear later (a mount)
	// and every write creates what it needs.
	if err := os.MkdirAll(e.writer.set.directory, e.writer.set.dirPerm); err != nil {
		e.logger.Error("Cannot create the output directory; writes will fail until it can be created",
			zap.String("directory", e.writer.set.directory), zap.Error(err))
	}
	e.writer.start()
	return nil
}

// Shutdown flushes and closes every file; the last signal exporter's
// shutdown calls it (sharedcomponent.WithLast).
func (e *jsonlExporter) Shutdown(context.Context) error {
	return e.writer.shutdown()
}

// batch holds one consumed batch encoded as lines, grouped by file.
// maxIdleBatches bounds the encode buffers kept between batches: enough for
// the exporter's concurrent consumers.
const maxIdleBatches = 16

type batch struct {
	enc     recordEncoder
	pathBuf []byte
	groups  []group
	n       int // groups in use
}

// group is the lines of one batch that go to one file.
type group struct {
	rel       string // path relative to the directory
	buf       []byte
	records   int
	resources []int // indexes of the resources that produced the lines
}

func (b *batch) reset() {
	for i := range b.groups[:b.n] {
		g := &b.groups[i]
		g.buf = g.buf[:0]
		g.records = 0
		g.resources = g.resources[:0]
	}
	b.n = 0
}

// groupFor returns the group of the file that resource number res, with
// attributes attrs, is written to.
func (b *batch) groupFor(t *pathTemplate, attrs pcommon.Map, fallback string, res int) *group {
	b.pathBuf = t.render(b.pathBuf[:0], attrs, fallback)
	for i := range b.groups[:b.n] {
		if g := &b.groups[i]; g.rel == string(b.pathBuf) {
			g.resources = append(g.resources, res)
			return g
		}
	}
	if b.n == len(b.groups) {
		b.groups = append(b.groups, group{})
	}
	g := &b.groups[b.n]
	b.n++
	// Batches of a run usually go to the file the previous batch went to:
	// keep its name rather than allocate it again.
	if g.rel != string(b.pathBuf) {
		g.rel = string(b.pathBuf)
	}
	g.resources = append(g.resources, res)
	return g
}

// signalExporter is the exporter of one signal: its path template and its
// internal metrics (which the collector labels with the signal).
type signalExporter struct {
	*jsonlExporter
	shared *sharedcomponent.Component[*jsonlExporter]
	tmpl   *pathTemplate
	// overflow is the file, relative to the directory, that takes this
	// signal's records beyond max_distinct_paths.
	overflow string
	tel      *telemetry
	tb       *metadata.TelemetryBuilder
	logger   *zap.Logger
}

func (s *signalExporter) shutdown(ctx context.Context) error {
	defer s.tb.Shutdown()
	return s.shared.Shutdown(ctx)
}

// abandon releases what was acquired for an exporter that was never built.
func (s *signalExporter) abandon() {
	_ = s.shutdown(context.Background())
}

func (s *signalExporter) getBatch() *batch {
	select {
	case b := <-s.batches:
		b.reset()
		return b
	default:
		return &batch{}
	}
}

// putBatch keeps b for a later batch, unless enough are kept already.
func (s *signalExporter) putBatch(b *batch) {
	select {
	case s.batches <- b:
	default:
	}
}

// push is the exporterhelper pusher of one signal: it writes a request's
// resources.
func push[T any, R pdatautil.Resource](s *signalExporter, sig *signal[T, R]) xexporterhelper.RequestConsumeFunc {
	return func(_ context.Context, req xexporterhelper.Request) error {
		r, ok := req.(*resourcesRequest[T, R])
		if !ok {
			return consumererror.NewPermanent(fmt.Errorf("jsonl_file cannot write a %T", req))
		}
		return consume(s, sig, r.resources)
	}
}

// consume encodes resources, of any signal, each into the group of the
// file its attributes name, and writes the groups. When some must be
// retried (writeGroups), the error carries a copy of those resources, so
// that exporterhelper retries only them.
func consume[T any, R pdatautil.Resource](s *signalExporter, sig *signal[T, R], rs []R) error {
	b := s.getBatch()
	defer s.putBatch(b)
	for i, r := range rs {
		g := b.groupFor(s.tmpl, r.Resource().Attributes(), s.fallback, i)
		var n int
		g.buf, n = sig.encode(&b.enc, g.buf, r)
		g.records += n
	}
	failed, err := s.writeGroups(b, len(rs))
	if len(failed) == 0 {
		return err
	}
	retry := make([]R, len(failed))
	for j, i := range failed {
		retry[j] = rs[i]
	}
	return sig.retryErr(err, sig.data(retry))
}

// writeGroups writes each group to its file. It returns nil when all were
// written. When some failed with an error worth retrying while others were
// written (or failed for good), it returns the indexes of the resources to
// retry, so that exporterhelper retries only those and no record is
// written twice. Otherwise it returns just the error, permanent when no
// retry can help.
func (s *signalExporter) writeGroups(b *batch, resources int) ([]int, error) {
	var retryErrs, permanentErrs []error
	var failed []int
	for i := range b.groups[:b.n] {
		g := &b.groups[i]
		if g.records == 0 {
			continue
		}
		err := s.writer.write(g.rel, s.overflow, g.buf, g.records, s.tel)
		if err == nil {
			continue
		}
		if consumererror.IsPermanent(err) {
			s.logger.Error("Dropping records: the file cannot be written",
				zap.String("path", s.writer.fileName(g.rel)), zap.Int("records", g.records), zap.Error(err))
			permanentErrs = append(permanentErrs, err)
			continue
		}
		s.logger.Warn("Writing records failed; exporterhelper will retry them",
			zap.String("path", s.writer.fileName(g.rel)), zap.Int("records", g.records), zap.Error(err))
		retryErrs = append(retryErrs, err)
		failed = append(failed, g.resources...)
	}
	switch {
	case len(retryErrs) == 0 && len(permanentErrs) == 0:
		return nil, nil
	case len(retryErrs) == 0:
		return nil, consumererror.NewPermanent(errors.Join(permanentErrs...))
	case len(failed) == resources:
		return nil, errors.Join(retryErrs...)
	default:
		return failed, errors.Join(retryErrs...)
	}
}
