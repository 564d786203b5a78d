// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package journal is the spool's queue on disk: an append-only log of
// records in segment files, fsynced per group of appends, read back in
// order in batches, each segment deleted once every record in it is done.
//
// Why by hand: exporterhelper's persistent queue writes each request in a
// transaction of its own, fsynced under the queue's lock, and two more
// when the request is read and when it is done (bbolt rewrites its pages
// each time). Behind 1,000 ranks that is three fsyncs per rank request,
// one after the other. Here one fsync covers every append that arrived
// while the previous one ran (group commit), and reading or finishing a
// record writes nothing.
package journal // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/journal"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrFull is Append's answer past Options.MaxBytes.
var ErrFull = errors.New("the spool is full")

// errClosed is Append's answer once the journal stops.
var errClosed = errors.New("the spool is stopping")

// Options of a journal.
type Options struct {
	// MaxBytes bounds the records held (written and not yet done, headers
	// included). An append past it is refused with ErrFull.
	MaxBytes int64
	// SegmentBytes is the size past which the next append starts a new
	// segment file (default 8 MiB).
	SegmentBytes int64
	// Lost is told of bytes of a segment found unreadable at Open (a torn
	// or damaged record and what follows it in that segment): records
	// that were written and are lost. Optional.
	Lost func(path string, from, to int64)
	// Held is told of every change of the records' bytes held. Optional.
	Held func(delta int64)
	// Memory bounds the records kept in memory until read (Append's
	// mem); nil keeps none.
	Memory *Memory
}

// Journal is one queue: Append from any goroutine, Read from consumers.
type Journal struct {
	dir  string
	opts Options

	mu     sync.Mutex
	more   *sync.Cond
	segs   []*segment // oldest first; the last may be the one appended to
	held   int64
	nextID uint64
	seq    uint64 // appends so far
	closed bool

	dirty []*segment // appended to since the last fsync began

	syncMu sync.Mutex // one fsync at a time; the appends waiting meanwhile share the next
	synced uint64     // appends covered by an fsync
}

// Open reads what dir holds (every segment a previous process left, all
// of it sent again but what it had marked done at Close) and returns the
// journal appending after it. dir is created at the first append.
func Open(dir string, opts Options) (*Journal, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 8 << 20
	}
	j := &Journal{dir: dir, opts: opts}
	j.more = sync.NewCond(&j.mu)
	segs, err := scan(dir, opts.Lost)
	if err != nil {
		return nil, err
	}
	for _, s := range segs {
		j.nextID = s.id + 1
		if s.pending() == 0 {
			s.remove()
			continue
		}
		j.segs = append(j.segs, s)
		j.hold(s.pendingBytes())
	}
	return j, nil
}

// Held is the records' bytes the journal holds.
func (j *Journal) Held() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.held
}

// Append writes one record of items items and returns once it is fsynced
// (or refused: ErrFull, a write or fsync error, the journal stopping).
// mem is the record in memory: while Options.Memory has room it is kept,
// and Read hands it out instead of reading the payload back.
func (j *Journal) Append(payload []byte, items int, mem any) error {
	if mem != nil && !j.opts.Memory.take(int64(len(payload))) {
		mem = nil
	}
	buf := encode(payload, items)
	defer records.Put(buf)
	rec := *buf
	j.mu.Lock()
	var s *segment
	var err error
	switch {
	case j.closed:
		err = errClosed
	case j.held+int64(len(rec)) > j.opts.MaxBytes:
		err = ErrFull
	default:
		if s, err = j.writable(); err == nil {
			err = s.append(rec, items, mem)
		}
	}
	if err != nil {
		j.mu.Unlock()
		if mem != nil {
			j.opts.Memory.give(int64(len(payload)))
		}
		return err
	}
	j.hold(int64(len(rec)))
	if n := len(j.dirty); n == 0 || j.dirty[n-1] != s {
		j.dirty = append(j.dirty, s)
	}
	j.seq++
	mine := j.seq
	j.more.Signal()
	j.mu.Unlock()
	return j.sync(mine)
}

// sync returns once append number mine is fsynced: by this call, or by
// another that started after it was written.
func (j *Journal) sync(mine uint64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced >= mine {
		return nil
	}
	j.mu.Lock()
	upto, dirty := j.seq, j.dirty
	j.dirty = nil
	j.mu.Unlock()
	for i, s := range dirty {
		if err := s.f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) { // closed: every record of it is done
			j.mu.Lock()
			j.dirty = append(dirty[i:], j.dirty...) // the next sync tries again
			j.mu.Unlock()
			return err // names the file
		}
	}
	j.synced = upto
	return nil
}

// writable is the segment to append to, sealing the last one past
// SegmentBytes (or broken by a failed write) and starting the next.
// Called with mu held.
func (j *Journal) writable() (*segment, error) {
	if n := len(j.segs); n > 0 {
		s := j.segs[n-1]
		if !s.sealed && s.size < j.opts.SegmentBytes {
			return s, nil
		}
		s.sealed = true // fsynced by the sync of its last appends
		if s.pending() == 0 {
			j.drop(s) // also one whose first write failed: a full disk makes no pile of empty files
		}
	}
	s, err := create(j.dir, j.nextID)
	if err != nil {
		return nil, err
	}
	j.nextID++
	j.segs = append(j.segs, s)
	return s, nil
}

// Batch is records read together: their payloads one after the other,
// or, when every record was kept in memory, the records in memory.
type Batch struct {
	Payload []byte
	Mem     []any
	Items   int
	// Path, From and To say where the records are: bytes [From, To) of
	// the segment file Path.
	Path     string
	From, To int64

	seg   *segment
	first int
	n     int
}

// Read waits for records and returns the oldest not yet read, up to
// maxItems items (at least one record), all of one segment; false once the
// journal stops. While its segment is still appended to and holds fewer
// than maxItems unread items, it waits for more until the oldest of them
// is wait old: fewer, larger batches.
func (j *Journal) Read(maxItems int, wait time.Duration) (Batch, bool) {
	j.mu.Lock()
	var s *segment
	for {
		if j.closed {
			j.mu.Unlock()
			return Batch{}, false
		}
		s = j.unread()
		if s == nil {
			j.more.Wait()
			continue
		}
		if s.sealed || s.unreadAtLeast(maxItems) {
			break
		}
		left := min(wait, wait-time.Duration(time.Now().UnixNano()-s.recs[s.next].at))
		if left <= 0 {
			break
		}
		t := time.AfterFunc(left, j.wake)
		j.more.Wait()
		t.Stop()
	}
	b := Batch{Path: s.path, seg: s, first: s.next}
	inMemory := true
	for s.next < len(s.recs) && (b.n == 0 || b.Items+int(s.recs[s.next].items) <= maxItems) {
		r := &s.recs[s.next]
		b.Items += int(r.items)
		if r.mem != nil {
			j.opts.Memory.give(int64(r.len))
			b.Mem = append(b.Mem, r.mem)
			r.mem = nil
		} else {
			inMemory = false
		}
		b.n++
		s.next++
	}
	b.From, b.To = s.recs[b.first].off, s.end(b.first+b.n-1)
	j.mu.Unlock()
	if inMemory {
		return b, true
	}
	b.Mem = nil
	// Outside the lock: the bytes are written, and the segment stays until
	// these records are done.
	var err error
	b.Payload, err = s.payloads(b.n, b.From, b.To)
	if err != nil {
		// The disk failed us: these records are lost. Report them and go
		// on.
		if j.opts.Lost != nil {
			j.opts.Lost(s.path, b.From, b.To)
		}
		j.Done(b)
		return j.Read(maxItems, wait)
	}
	return b, true
}

// unread is the oldest segment with records not yet read. Called with mu
// held.
func (j *Journal) unread() *segment {
	for _, c := range j.segs {
		if c.next < len(c.recs) {
			return c
		}
	}
	return nil
}

// wake has the waiting readers look again.
func (j *Journal) wake() {
	j.mu.Lock()
	j.more.Broadcast()
	j.mu.Unlock()
}

// Done marks b's records sent (or dead-lettered): they will not be read
// again, here or after a restart, and their segment goes once all of its
// records are done.
func (j *Journal) Done(b Batch) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := b.seg
	s.markDone(b.first, b.n)
	j.hold(-(b.To - b.From))
	switch {
	case s.sealed && s.pending() == 0:
		j.drop(s)
	case time.Since(s.noted) >= noteEvery:
		// A process killed sends again only what was done since: the
		// side file is written to the page cache, not fsynced (a node
		// crash sends more again, never less).
		_ = s.noteDone()
	}
}

// noteEvery is how often a segment's side file notes how far it is done.
const noteEvery = time.Second

// Stop ends the reads (Read returns false) and refuses new appends.
func (j *Journal) Stop() {
	j.mu.Lock()
	j.closed = true
	j.more.Broadcast()
	j.mu.Unlock()
}

// Close stops the journal and closes its files, noting in each segment's
// side file how far its records are done (as Done does once a second), so
// a restart sends again only what was not. Call it once no batch is being
// sent.
func (j *Journal) Close() error {
	j.Stop()
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	for _, s := range j.segs {
		if s.pending() == 0 {
			s.remove()
			continue
		}
		errs = append(errs, s.close())
	}
	j.segs = nil
	return errors.Join(errs...)
}

// drop removes a segment whose records are all done. Called with mu held.
func (j *Journal) drop(s *segment) {
	s.remove()
	for i, c := range j.segs {
		if c == s {
			j.segs = append(j.segs[:i], j.segs[i+1:]...)
			break
		}
	}
}

func (j *Journal) hold(delta int64) {
	j.held += delta
	if j.opts.Held != nil && delta != 0 {
		j.opts.Held(delta)
	}
}

// segPath names segment id in dir: the names sort in the order written.
func segPath(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016d.seg", id))
}
