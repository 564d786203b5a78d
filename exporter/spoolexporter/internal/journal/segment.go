// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package journal // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/journal"

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A record on disk: payload length, items, CRC-32C of the payload, then
// the payload (for the spool, an OTLP request in protobuf).
const headerLen = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// records are the buffers records are encoded in, written, and given back:
// a request of 500 spans is about 90 KB, so one less allocation of that
// size per request.
var records = sync.Pool{New: func() any { return new([]byte) }}

// encode returns the record of payload in a buffer of records.
func encode(payload []byte, items int) *[]byte {
	buf := records.Get().(*[]byte)
	*buf = append((*buf)[:0], make([]byte, headerLen)...)
	binary.LittleEndian.PutUint32((*buf)[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32((*buf)[4:], uint32(items))
	binary.LittleEndian.PutUint32((*buf)[8:], crc32.Checksum(payload, castagnoli))
	*buf = append(*buf, payload...)
	return buf
}

// rec is where a record is in its segment, and the record in memory
// until it is read, if its writer gave it.
type rec struct {
	off   int64
	len   uint32 // payload
	items uint32
	at    int64 // appended, Unix ns (0: read back at start)
	mem   any
}

// segment is one file of records. Its fields are guarded by the
// journal's mu, but for f and path (set once).
type segment struct {
	id     uint64
	path   string
	f      *os.File // read and appended to, open until removed or closed
	size   int64    // bytes of whole records
	recs   []rec
	next   int  // the next record to read
	sealed bool // no more appends

	// done: records [0, prefix) are done; later ones done out of order
	// are in ahead (first record -> count).
	prefix int
	ahead  map[int]int
	nDone  int
	noted  time.Time // the side file last written
}

func create(dir string, id uint64) (*segment, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := segPath(dir, id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// The new file's name must survive a crash too.
	if err := syncDir(dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &segment{id: id, path: path, f: f, ahead: map[int]int{}}, nil
}

// append writes r; a failed write (a full disk) is cut off and seals the
// segment, the next append starting a new one.
func (s *segment) append(r []byte, items int, mem any) error {
	if _, err := s.f.Write(r); err != nil {
		_ = s.f.Truncate(s.size)
		s.sealed = true
		return err // names the file
	}
	s.recs = append(s.recs, rec{off: s.size, len: uint32(len(r) - headerLen), items: uint32(items), at: time.Now().UnixNano(), mem: mem})
	s.size += int64(len(r))
	return nil
}

// unreadAtLeast says whether the records not yet read hold n items or more.
func (s *segment) unreadAtLeast(n int) bool {
	for _, r := range s.recs[s.next:] {
		if n -= int(r.items); n <= 0 {
			return true
		}
	}
	return false
}

// end is the offset after record i.
func (s *segment) end(i int) int64 {
	return s.recs[i].off + headerLen + int64(s.recs[i].len)
}

func (s *segment) pending() int { return len(s.recs) - s.nDone }

func (s *segment) pendingBytes() int64 {
	if s.prefix == len(s.recs) {
		return 0
	}
	return s.size - s.recs[s.prefix].off
}

// payloads reads the n records in bytes [from, to) of the file and returns
// their payloads one after the other.
func (s *segment) payloads(n int, from, to int64) ([]byte, error) {
	buf := make([]byte, to-from)
	if _, err := s.f.ReadAt(buf, from); err != nil {
		return nil, err // names the file
	}
	out := buf[:0]
	pos := 0
	for range n {
		l := int(binary.LittleEndian.Uint32(buf[pos:]))
		out = append(out, buf[pos+headerLen:pos+headerLen+l]...) // in place: out never passes pos
		pos += headerLen + l
	}
	return out, nil
}

func (s *segment) markDone(first, n int) {
	s.nDone += n
	s.ahead[first] = n
	for {
		c, ok := s.ahead[s.prefix]
		if !ok {
			return
		}
		delete(s.ahead, s.prefix)
		s.prefix += c
	}
}

// noteDone writes how far s is done, the end of its done prefix, to its
// side file.
func (s *segment) noteDone() error {
	s.noted = time.Now()
	if s.prefix == 0 {
		return nil
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(s.end(s.prefix-1)))
	return os.WriteFile(s.path+".done", b[:], 0o600)
}

// close notes how far s is done and closes it.
func (s *segment) close() error {
	return errors.Join(s.noteDone(), s.f.Close())
}

func (s *segment) remove() {
	_ = s.f.Close()
	_ = os.Remove(s.path)
	_ = os.Remove(s.path + ".done")
}

// scan opens the segments dir holds, oldest first, each sealed, its
// records indexed up to the first that does not read back whole.
func scan(dir string, lost func(path string, from, to int64)) ([]*segment, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if id, err := strconv.ParseUint(name, 10, 64); ok && err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var segs []*segment
	for _, id := range ids {
		s, err := load(segPath(dir, id), id, lost)
		if err != nil {
			for _, o := range segs {
				_ = o.f.Close()
			}
			return nil, err
		}
		segs = append(segs, s)
	}
	return segs, nil
}

func load(path string, id uint64, lost func(path string, from, to int64)) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, err // names the file
	}
	s := &segment{id: id, path: path, f: f, sealed: true, ahead: map[int]int{}}
	for int(s.size)+headerLen <= len(data) {
		h := data[s.size:]
		l := int64(binary.LittleEndian.Uint32(h[0:]))
		if s.size+headerLen+l > int64(len(data)) || crc32.Checksum(h[headerLen:headerLen+l], castagnoli) != binary.LittleEndian.Uint32(h[8:]) {
			break
		}
		s.recs = append(s.recs, rec{off: s.size, len: uint32(l), items: binary.LittleEndian.Uint32(h[4:])})
		s.size += headerLen + l
	}
	if s.size < int64(len(data)) && lost != nil {
		lost(path, s.size, int64(len(data)))
	}
	// What a previous process marked done at its Close.
	if b, err := os.ReadFile(path + ".done"); err == nil && len(b) == 8 {
		upto := int64(binary.LittleEndian.Uint64(b))
		for s.prefix < len(s.recs) && s.end(s.prefix) <= upto {
			s.prefix++
		}
		s.nDone, s.next = s.prefix, s.prefix
	}
	return s, nil
}

func syncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
