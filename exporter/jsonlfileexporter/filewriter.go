// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

const (
	// flushThreshold is how many bytes of records a file buffers before they
	// are written without waiting for flush_interval. With compression each
	// write is one gzip member or zstd frame, so this is also their size.
	flushThreshold = 256 << 10

	mib = 1 << 20
)

// fileWriterSettings is the part of Config the file writer needs, resolved.
type fileWriterSettings struct {
	directory     string // absolute
	perm          os.FileMode
	dirPerm       os.FileMode
	appendMode    bool
	compression   string
	fsync         bool
	flushInterval time.Duration
	maxOpenFiles  int
	maxBytes      int64
	maxDays       int
	maxBackups    int
	localTime     bool
	maxPaths      int
}

func newFileWriterSettings(cfg *Config) (fileWriterSettings, error) {
	dir, err := filepath.Abs(cfg.Directory)
	if err != nil {
		return fileWriterSettings{}, fmt.Errorf("directory %q: %w", cfg.Directory, err)
	}
	perm, err := parseFilePermissions(cfg.FilePermissions)
	if err != nil {
		return fileWriterSettings{}, err
	}
	compression := string(cfg.Compression)
	if compression == compressionNone {
		compression = ""
	}
	return fileWriterSettings{
		directory:     dir,
		perm:          perm,
		dirPerm:       dirPermissions(perm),
		appendMode:    cfg.Append,
		compression:   compression,
		fsync:         cfg.Fsync,
		flushInterval: cfg.FlushInterval,
		maxOpenFiles:  cfg.MaxOpenFiles,
		maxBytes:      int64(cfg.Rotation.MaxMegabytes) * mib,
		maxDays:       cfg.Rotation.MaxDays,
		maxBackups:    cfg.Rotation.MaxBackups,
		localTime:     cfg.Rotation.LocalTime,
		maxPaths:      cfg.MaxDistinctPaths,
	}, nil
}

// compressor is the part of gzip.Writer and zstd.Encoder the writer uses:
// each flush becomes one complete gzip member or zstd frame.
type compressor interface {
	Reset(w io.Writer)
	Write(p []byte) (int, error)
	Close() error
}

// fileWriter owns the output files. Records arrive as complete lines, are
// buffered per file and reach the file in writes of whole lines only; a
// failed write is taken back (the file is truncated to its previous size),
// so a file never holds part of a line because of an error.
type fileWriter struct {
	set    fileWriterSettings
	logger *zap.Logger
	now    func() time.Time

	mu    sync.Mutex
	files map[string]*outFile // by path relative to the directory
	lru   list.List           // of *outFile, most recently used first
	// seen records the files this writer has opened: true when the writer
	// knows the file ends with a complete line (or compressed member).
	seen       map[string]bool
	comp       compressor
	compressed bytes.Buffer
	closed     bool
	paths      recentPaths
	// overflowLog rate-limits the warning about max_distinct_paths.
	overflowLog ratelog.Limiter[struct{}]

	startOnce sync.Once
	stopOnce  sync.Once
	stop      chan struct{}
	done      chan struct{} // closed when the periodic flush has ended
}

// outFile is one output file. f is nil while the file is closed after an
// error it could not take back; the next write reopens (and repairs) it.
type outFile struct {
	rel            string
	path           string // absolute
	f              *os.File
	size           int64
	pending        []byte // complete lines not yet written
	pendingRecords int
	// pendingBy credits the buffered records to the signals that wrote
	// them, in order: signals whose paths resolve to one file share it.
	pendingBy []pendingShare
	tel       *telemetry // the signal that opened the file: open/close errors
	elem      *list.Element
}

// pendingShare is how many of a file's buffered records and bytes one
// signal wrote.
type pendingShare struct {
	tel            *telemetry
	records, bytes int
}

func (of *outFile) addPending(tel *telemetry, records, bytes int) {
	if n := len(of.pendingBy); n > 0 && of.pendingBy[n-1].tel == tel {
		of.pendingBy[n-1].records += records
		of.pendingBy[n-1].bytes += bytes
		return
	}
	of.pendingBy = append(of.pendingBy, pendingShare{tel: tel, records: records, bytes: bytes})
}

func newFileWriter(set fileWriterSettings, logger *zap.Logger) (*fileWriter, error) {
	w := &fileWriter{
		set:    set,
		logger: logger,
		now:    time.Now,
		// One warning a minute says as much as one a batch.
		overflowLog: ratelog.Limiter[struct{}]{Every: time.Minute},
		files:       make(map[string]*outFile),
		seen:        make(map[string]bool),
		paths:       newRecentPaths(set.maxPaths),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	switch set.compression {
	case compressionGzip:
		gz, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		if err != nil {
			return nil, fmt.Errorf("gzip writer: %w", err)
		}
		w.comp = gz
	case compressionZstd:
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd writer: %w", err)
		}
		w.comp = enc
	}
	return w, nil
}

// fileName returns the file name for a rendered template: compression adds
// its suffix unless the template already ends with it.
func (w *fileWriter) fileName(rel string) string {
	suffix := compressionSuffix[w.set.compression]
	p := filepath.Join(w.set.directory, rel)
	if suffix != "" && !strings.HasSuffix(p, suffix) {
		p += suffix
	}
	return p
}

// compressionSuffix is the file name suffix each compression adds.
var compressionSuffix = map[string]string{compressionGzip: ".gz", compressionZstd: ".zst"}

// start repairs the files an earlier run left and begins the periodic flush.
func (w *fileWriter) start() {
	w.startOnce.Do(func() {
		w.repairExisting()
		w.runFlushLoop()
	})
}

func (w *fileWriter) runFlushLoop() {
	if w.set.flushInterval <= 0 {
		close(w.done)
		return
	}
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(w.set.flushInterval)
		defer ticker.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ticker.C:
				w.flushAll()
			}
		}
	}()
}

// write queues data, complete lines holding records records, for the file
// rel. It writes at once when flush_interval is 0 or the file's buffer is
// full. On error nothing of data is in the file, and data is not kept.
// When rel would be a path beyond max_distinct_paths, data goes to
// overflow instead.
func (w *fileWriter) write(rel, overflow string, data []byte, records int, tel *telemetry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return consumererror.NewPermanent(errors.New("jsonl_file exporter is shut down"))
	}
	if now := w.now(); !w.paths.admit(rel, now) {
		tel.overflowed(records)
		if w.overflowLog.Allow(struct{}{}, now) {
			w.logger.Warn("More distinct files than max_distinct_paths within an hour: writing the records of new paths to the overflow file",
				zap.Int("max_distinct_paths", w.set.maxPaths), zap.String("path", w.fileName(rel)),
				zap.String("overflow_file", w.fileName(overflow)),
				zap.String("fix", "if these are real runs, raise max_distinct_paths; if a sender invents run ids, fix the sender"))
		}
		rel = overflow
	}
	of, err := w.acquire(rel, tel)
	if err != nil {
		return err
	}
	if w.set.flushInterval > 0 && len(of.pending)+len(data) < flushThreshold {
		of.pending = append(of.pending, data...)
		of.pendingRecords += records
		of.addPending(tel, records, len(data))
		return nil
	}
	return w.flush(of, data, records, tel)
}

// flushAll writes the buffered records of every file. Failures are logged
// and counted; the records stay buffered for the next attempt.
func (w *fileWriter) flushAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for e := w.lru.Front(); e != nil; e = e.Next() {
		of := e.Value.(*outFile)
		if len(of.pending) == 0 {
			continue
		}
		if err := w.flush(of, nil, 0, of.tel); err != nil {
			w.logger.Warn("Flushing buffered records failed; will retry",
				zap.String("path", of.path), zap.Int("records", of.pendingRecords), zap.Error(err))
		}
	}
}

// acquire returns the open file for rel, opening it (and closing the least
// recently used file when max_open_files are open) as needed.
func (w *fileWriter) acquire(rel string, tel *telemetry) (*outFile, error) {
	if of, ok := w.files[rel]; ok {
		w.lru.MoveToFront(of.elem)
		return of, nil
	}
	for len(w.files) >= w.set.maxOpenFiles {
		if err := w.evictOne(); err != nil {
			return nil, err
		}
	}
	of := &outFile{rel: rel, path: w.fileName(rel), tel: tel}
	if err := w.open(of); err != nil {
		return nil, err
	}
	of.elem = w.lru.PushFront(of)
	w.files[rel] = of
	return of, nil
}

// evictOne flushes and closes the least recently used file that can be
// flushed. A file whose records cannot be written stays open, so that no
// accepted record is lost.
func (w *fileWriter) evictOne() error {
	var errs []error
	for e := w.lru.Back(); e != nil; e = e.Prev() {
		of := e.Value.(*outFile)
		if err := w.closeFile(of); err != nil {
			errs = append(errs, err)
			continue
		}
		w.lru.Remove(e)
		delete(w.files, of.rel)
		return nil
	}
	return fmt.Errorf("max_open_files (%d) files are open and none could be closed: %w", w.set.maxOpenFiles, errors.Join(errs...))
}

// closeFile flushes and closes of. On a flush error the file stays open.
func (w *fileWriter) closeFile(of *outFile) error {
	if err := w.flush(of, nil, 0, of.tel); err != nil {
		return err
	}
	if of.f == nil {
		return nil
	}
	err := of.f.Close()
	of.f = nil
	if err != nil {
		of.tel.failed(opClose)
		// Every byte was written before the close, so only the error is left
		// to report; the file's end is not known to be a complete line.
		w.seen[of.path] = false
		return fmt.Errorf("close %s: %w", of.path, err)
	}
	return nil
}

// flush writes the file's buffered records followed by extra, all in one
// write, so a reader or a crash sees all of them or none. On error the file
// is as before and the buffered records are kept; extra is not.
func (w *fileWriter) flush(of *outFile, extra []byte, extraRecords int, tel *telemetry) error {
	if len(of.pending) == 0 && len(extra) == 0 {
		return nil
	}
	pendingLen := len(of.pending)
	var payload []byte
	switch {
	case w.comp != nil:
		w.compressed.Reset()
		w.comp.Reset(&w.compressed)
		_, err1 := w.comp.Write(of.pending)
		_, err2 := w.comp.Write(extra)
		if err := errors.Join(err1, err2, w.comp.Close()); err != nil {
			return fmt.Errorf("compress records for %s: %w", of.path, err)
		}
		payload = w.compressed.Bytes()
	case pendingLen == 0:
		payload = extra
	default:
		of.pending = append(of.pending, extra...)
		payload = of.pending
	}
	n, err := w.writeFile(of, payload, tel)
	if err != nil {
		of.pending = of.pending[:pendingLen]
		return err
	}
	// Each signal is credited its records, and its share of the bytes
	// written (after compression: in proportion to its encoded bytes).
	total := pendingLen + len(extra)
	credit := func(t *telemetry, records, bytes int) {
		t.written(records, int(int64(n)*int64(bytes)/int64(max(total, 1))))
	}
	for _, sh := range of.pendingBy {
		credit(sh.tel, sh.records, sh.bytes)
	}
	if extraRecords > 0 || len(extra) > 0 {
		credit(tel, extraRecords, len(extra))
	}
	of.pending = of.pending[:0]
	of.pendingRecords = 0
	of.pendingBy = of.pendingBy[:0]
	if cap(of.pending) > 4*flushThreshold {
		// A burst grew the buffer; do not hold on to it for every open file.
		of.pending = nil
	}
	return nil
}

// writeFile appends payload, whole lines or whole compressed members, to
// the file, rotating first when the write would take the file past
// rotation::max_megabytes.
func (w *fileWriter) writeFile(of *outFile, payload []byte, tel *telemetry) (int, error) {
	if of.f == nil {
		if err := w.open(of); err != nil {
			return 0, err
		}
	}
	if w.set.maxBytes > 0 && of.size > 0 && of.size+int64(len(payload)) > w.set.maxBytes {
		if err := w.rotate(of); err != nil {
			tel.failed(opRotate)
			w.logger.Error("Rotating file failed; writing on to the current file",
				zap.String("path", of.path), zap.Error(err))
			if of.f == nil {
				if err := w.open(of); err != nil {
					return 0, err
				}
			}
		} else {
			tel.rotated()
		}
	}
	n, err := of.f.Write(payload)
	op := opWrite
	if err == nil && w.set.fsync {
		op = opSync
		if err = of.f.Sync(); err == nil {
			tel.synced()
		}
	}
	if err != nil {
		tel.failed(op)
		// Take the partial write back: the file must end with a complete line.
		if n > 0 || op == opSync {
			if terr := of.f.Truncate(of.size); terr != nil {
				w.logger.Error("Cannot remove a partial write; the file will be repaired when reopened",
					zap.String("path", of.path), zap.Error(terr))
				w.seen[of.path] = false
				_ = of.f.Close()
				of.f = nil
			}
		}
		return 0, classifyFileError(fmt.Errorf("%s %s: %w", op, of.path, err))
	}
	of.size += int64(n)
	return n, nil
}

// open opens (creating as needed) the file of. An existing file is appended
// to; when it does not end with a complete line, member or frame, because a
// crash cut a write short, the cut tail is removed first (repair). A
// compressed file holding anything else is moved aside, whole, and a new
// one begun: appending after bytes a decoder stops at would hide the new
// records.
func (w *fileWriter) open(of *outFile) error {
	clean, seen := w.seen[of.path]
	if err := os.MkdirAll(filepath.Dir(of.path), w.set.dirPerm); err != nil {
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("create directory for %s: %w", of.path, err))
	}
	st, statErr := os.Stat(of.path)
	existed := statErr == nil
	if existed && !st.Mode().IsRegular() {
		of.tel.failed(opOpen)
		return consumererror.NewPermanent(fmt.Errorf("open %s: not a regular file (%s)", of.path, st.Mode().Type()))
	}
	f, err := os.OpenFile(of.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, w.set.perm)
	if err != nil {
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("open %s: %w", of.path, err))
	}
	// Only a file no other collector has open is truncated or repaired
	// (filelock_unix.go); this writer then holds a shared lock while it has
	// the file open.
	own, err := lockExclusive(f)
	if err != nil {
		_ = f.Close()
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("lock %s: %w", of.path, err))
	}
	if !seen && !w.set.appendMode {
		if !own {
			w.logger.Warn("Appending instead of truncating: another collector is writing this file", zap.String("path", of.path))
		} else if truncErr := f.Truncate(0); truncErr != nil {
			_ = f.Close()
			of.tel.failed(opOpen)
			return classifyFileError(fmt.Errorf("truncate %s: %w", of.path, truncErr))
		}
	}
	if !existed {
		// The umask must not narrow the configured file_permissions.
		if chmodErr := f.Chmod(w.set.perm); chmodErr != nil {
			w.logger.Warn("Cannot set file_permissions", zap.String("path", of.path), zap.Error(chmodErr))
		}
		if w.set.fsync {
			syncDir(filepath.Dir(of.path))
		}
	}
	st, err = f.Stat()
	if err != nil {
		_ = f.Close()
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("stat %s: %w", of.path, err))
	}
	size := st.Size()
	// A plain file's tail is checked on every open (it is cheap); a
	// compressed one only when this writer does not know how it ends.
	if own && size > 0 && (w.comp == nil || !seen || !clean) {
		size, err = w.repair(f, of.path, w.set.compression, size)
		if errors.Is(err, errForeign) {
			w.logger.Warn("An existing compressed file holds data this exporter cannot append after; moving it aside and starting a new file",
				zap.String("path", of.path), zap.Error(err))
			_ = f.Close()
			return w.reopenAside(of)
		}
		if err != nil {
			_ = f.Close()
			of.tel.failed(opOpen)
			return classifyFileError(err)
		}
	}
	if err := lockShared(f); err != nil {
		_ = f.Close()
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("lock %s: %w", of.path, err))
	}
	of.f = f
	of.size = size
	w.seen[of.path] = true
	return nil
}

// shutdown stops the periodic flush, writes every buffered record and
// closes all files. Records that cannot be written are reported.
func (w *fileWriter) shutdown() error {
	w.stopOnce.Do(func() { close(w.stop) })
	w.startOnce.Do(func() { close(w.done) }) // never started: nothing to wait for
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for e := w.lru.Front(); e != nil; e = e.Next() {
		of := e.Value.(*outFile)
		records := of.pendingRecords
		if err := w.closeFile(of); err != nil {
			w.logger.Error("Records lost at shutdown: cannot write them",
				zap.String("path", of.path), zap.Int("records", records), zap.Error(err))
			errs = append(errs, err)
			if of.f != nil {
				_ = of.f.Close()
				of.f = nil
			}
		}
	}
	w.lru.Init()
	clear(w.files)
	return errors.Join(errs...)
}

// classifyFileError marks errors that retrying cannot fix as permanent: the
// path is blocked by something that is not a directory or a regular file,
// or is too long. Everything else (a full disk, a missing permission, an
// I/O error) is worth retrying.
func classifyFileError(err error) error {
	for _, errno := range []syscall.Errno{syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, syscall.ELOOP} {
		if errors.Is(err, errno) {
			return consumererror.NewPermanent(err)
		}
	}
	return err
}

// syncDir makes a new or renamed directory entry durable (fsync: true).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
