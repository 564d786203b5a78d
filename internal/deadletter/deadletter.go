// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package deadletter writes what a destination did not take into a
// dead-letter file per run, destination and signal,
// <directory>/<run>/dead-letters/<destination>/<signal>.jsonl: one OTLP JSON
// export request per line (the stock otlpjsonfile receiver's format, and
// the body of an OTLP/HTTP JSON request), each resource carrying the
// reason. A letter is on disk, fsynced with its new directories, before the
// caller lets its request leave the queue; a write that fails is an error,
// so the request stays queued. The exporters that send over the network
// (nemo_otlp, weave, nemo_awss3, the agent's spool) share this one writer;
// Deliverer and Window are the delivery around it.
package deadletter // import "github.com/nemo-lens/otelcol-nemo/internal/deadletter"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/pathvalue"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

// Reason says why a request was dead-lettered: the reason attribute of the
// exporters' dead-letter metrics and the letter's nemo.dead_letter.reason.
type Reason uint8

const (
	// Refused is a permanent error: a 4xx, a non-retryable gRPC code, a
	// request that cannot be encoded.
	Refused Reason = iota
	// RetryWindow is a request still failing when its retry window ran out.
	RetryWindow
	// PartialSuccess is a 2xx answer that rejected items.
	PartialSuccess
	// Unroutable is an item the exporter cannot tell where to send (Weave:
	// no W&B entity or project).
	Unroutable
	// NumReasons is the number of reasons.
	NumReasons
)

func (r Reason) String() string {
	switch r {
	case RetryWindow:
		return "retry_window"
	case PartialSuccess:
		return "partial_success"
	case Unroutable:
		return "unroutable"
	default:
		return "refused"
	}
}

// The resource attributes a letter carries (configs/replay.yaml removes
// them before sending again).
const (
	AttrReason = "nemo.dead_letter.reason"
	AttrError  = "nemo.dead_letter.error"
	AttrTime   = "nemo.dead_letter.time"
)

// Config places the letters; an exporter embeds it as `dead_letter`.
type Config struct {
	// Directory is the runs' directory (the jsonl_file exporter's in the
	// presets, so a run's letters sit next to its files).
	Directory string `mapstructure:"directory"`
	// RunAttribute is the resource attribute naming the run.
	RunAttribute string `mapstructure:"run_attribute"`
	// MissingRun names the run of a resource without RunAttribute.
	MissingRun string `mapstructure:"missing_run"`
}

// NewDefaultConfig is the default: runs by nemo.run.id, no directory.
func NewDefaultConfig() Config {
	return Config{RunAttribute: "nemo.run.id", MissingRun: "unknown"}
}

// Validate names the key and the fix; the collector puts the exporter and
// dead_letter:: in front.
func (c Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory is required: what the destination does not take is written there, next to the runs' files (the presets use NEMO_TELEMETRY_DIR)"))
	}
	if c.RunAttribute == "" {
		errs = append(errs, errors.New("run_attribute must not be empty (default nemo.run.id)"))
	}
	if c.MissingRun == "" || strings.ContainsAny(c.MissingRun, `/\`) || strings.HasPrefix(c.MissingRun, ".") {
		errs = append(errs, fmt.Errorf("missing_run: %q must be a plain file name (default unknown)", c.MissingRun))
	}
	return errors.Join(errs...)
}

// RunDir is the directory of one run's letters, every destination's:
// <directory>/<run>/dead-letters. With Dir, the one place the layout is
// written down.
func RunDir(directory, run string) string {
	return filepath.Join(directory, string(pathvalue.Append(nil, run)), "dead-letters")
}

// Dir is the directory of one run's letters for one destination (an
// exporter id, '/' written '_').
func Dir(directory, run, destination string) string {
	return filepath.Join(RunDir(directory, run), string(pathvalue.Append(nil, destination)))
}

// File is one dead-letter file of a run, as the run page lists it.
type File struct {
	Destination string    `json:"destination"`
	Signal      string    `json:"signal"`
	Bytes       int64     `json:"bytes"`
	Modified    time.Time `json:"modified"`
	Path        string    `json:"path"`
}

// List returns a run's dead-letter files, at most limit (none, or no
// directory: nil).
func List(directory, run string, limit int) []File {
	dir := RunDir(directory, run)
	dests, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []File
	for _, d := range dests {
		if !d.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, d.Name()))
		if err != nil {
			continue
		}
		for _, f := range files {
			signal, ok := strings.CutSuffix(f.Name(), ".jsonl")
			info, err := f.Info()
			if !ok || err != nil || !info.Mode().IsRegular() {
				continue
			}
			if len(out) == limit {
				return out
			}
			out = append(out, File{Destination: d.Name(), Signal: signal, Bytes: info.Size(), Modified: info.ModTime().UTC(), Path: filepath.Join(dir, d.Name(), f.Name())})
		}
	}
	return out
}

// Writer writes one destination's letters.
type Writer struct {
	cfg         Config
	destination string
	logger      *zap.Logger
	counted     func(r Reason, items int)
	warn        ratelog.Limiter[string] // one warning per run and reason a minute

	mu sync.Mutex // appends of concurrent consumers never interleave
}

// NewWriter returns the writer of destination (an exporter id); counted
// records each letter's items in the exporter's metric.
func NewWriter(cfg Config, destination string, logger *zap.Logger, counted func(r Reason, items int)) *Writer {
	return &Writer{
		cfg: cfg, destination: destination, logger: logger, counted: counted,
		warn: ratelog.Limiter[string]{Every: time.Minute, MaxKeys: 10_000},
	}
}

// Signal is what the writer needs of one signal: its resources, its name
// (the file's) and its OTLP JSON encoding.
type Signal[T any] struct {
	pdatautil.Ops[T]
	Name string
	JSON func(T) ([]byte, error)
}

// Write dead-letters d, split by run, for reason r with the destination's
// answer.
func Write[T any](w *Writer, sig Signal[T], d T, r Reason, detail string) error {
	byRun := map[string]T{}
	var order []string
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range sig.Len(d) {
		run := w.cfg.MissingRun
		if v, ok := sig.Resource(d, i).Attributes().Get(w.cfg.RunAttribute); ok && v.AsString() != "" {
			run = v.AsString()
		}
		part, ok := byRun[run]
		if !ok {
			part = sig.Empty()
			byRun[run] = part
			order = append(order, run)
		}
		sig.CopyResource(d, i, part)
		attrs := sig.Resource(part, sig.Len(part)-1).Attributes()
		attrs.PutStr(AttrReason, r.String())
		attrs.PutStr(AttrError, detail)
		attrs.PutStr(AttrTime, now)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Letters are rare and fsynced: forgetting the runs not warned about
	// for a minute here costs little, and keeps the warnings coming for
	// new runs in a collector that lived through many.
	w.warn.Sweep(time.Now())
	for _, run := range order {
		part := byRun[run]
		line, err := sig.JSON(part)
		if err != nil {
			return fmt.Errorf("dead letter of run %q: encoding: %w", run, err)
		}
		path := filepath.Join(Dir(w.cfg.Directory, run, w.destination), sig.Name+".jsonl")
		if err := appendLine(path, line); err != nil {
			w.logger.Error("Cannot write a dead letter; the request stays in the queue and is tried again",
				zap.String("path", path), zap.Error(err))
			return fmt.Errorf("dead letter %s: %w", path, err)
		}
		items := sig.Items(part)
		w.counted(r, items)
		if n, ok := w.warn.AllowN(run+"\x00"+r.String(), time.Now(), int64(items)); ok {
			w.logger.Warn("The destination did not take these items: written to the run's dead-letter file; send them again with configs/replay.yaml once the cause is fixed",
				zap.String("run", run), zap.String("reason", r.String()), zap.String("error", detail),
				zap.Int64("items_since_last_message", n), zap.String("path", path))
		}
	}
	return nil
}

// appendLine appends line and a newline to path and fsyncs it, and the
// new directories when the file is new (so the file survives a crash too).
// A write that fails is cut back: no half line stays.
func appendLine(path string, line []byte) error {
	dir := filepath.Dir(path)
	_, statErr := os.Stat(path)
	isNew := os.IsNotExist(statErr)
	if isNew {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		if _, err = f.Write(append(line, '\n')); err == nil {
			err = f.Sync()
		} else {
			_ = f.Truncate(size)
		}
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil || !isNew {
		return err
	}
	// The destination's directory, dead-letters/ and the run's may all be new.
	return syncDirs(dir, 3)
}

func syncDirs(dir string, n int) error {
	for range n {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return err
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// Traces, Metrics and Logs are the signals' letters: pdata's OTLP JSON
// encoding, the same bytes as an OTLP/HTTP JSON export request.
var (
	Traces  = Signal[ptrace.Traces]{Ops: pdatautil.TracesOps, Name: "traces", JSON: (&ptrace.JSONMarshaler{}).MarshalTraces}
	Metrics = Signal[pmetric.Metrics]{Ops: pdatautil.MetricsOps, Name: "metrics", JSON: (&pmetric.JSONMarshaler{}).MarshalMetrics}
	Logs    = Signal[plog.Logs]{Ops: pdatautil.LogsOps, Name: "logs", JSON: (&plog.JSONMarshaler{}).MarshalLogs}
)

// Counted is NewWriter's counted for an exporter's dead-letter counter (its
// mdatagen metric, attributes exporter and reason), the attribute sets
// built once.
func Counted(counter metric.Int64Counter, exporter string) func(Reason, int) {
	var opts [NumReasons]metric.AddOption
	for r := range NumReasons {
		opts[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", exporter), attribute.String("reason", r.String())))
	}
	return func(r Reason, items int) { counter.Add(context.Background(), int64(items), opts[r]) }
}
