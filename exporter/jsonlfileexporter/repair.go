// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"go.uber.org/zap"
)

// A kill in the middle of a write(2) can leave a file's last line (plain)
// or last gzip member / zstd frame (compressed) cut short. It holds only
// records that were not acknowledged, since a write is acknowledged after it
// returns. The writer removes it: from every JSONL file under the directory
// at start, so that files this run never writes to again are readable too,
// and from a file it opens to append to.

const (
	// repairWindow is how far back from the end of an existing plain file
	// the exporter looks for the last complete line (see repairTail).
	repairWindow = 16 << 20

	zstdMagic          = 0xFD2FB528
	zstdSkippableMagic = 0x184D2A50 // the low 4 bits are free
	zstdBlockHeader    = 3
)

// errCut is a compressed member or frame that the file ends in the middle
// of; errForeign is data that is not gzip or zstd at all.
var (
	errCut     = errors.New("cut short")
	errForeign = errors.New("not written by this exporter")
)

// codecOf says how a file of ours is encoded, by its name: plain .jsonl,
// .jsonl.gz or .jsonl.zst. Other files are not ours.
func codecOf(path string) (codec string, ours bool) {
	for c, suffix := range compressionSuffix {
		if strings.HasSuffix(path, ".jsonl"+suffix) {
			return c, true
		}
	}
	return "", strings.HasSuffix(path, ".jsonl")
}

// repairExisting repairs the JSONL files under the directory, whatever
// their compression (a file written before compression was switched on or
// off is repaired too). Rotated files are skipped: a file is rotated only
// between complete writes. Without append every file is truncated anyway.
func (w *fileWriter) repairExisting() {
	if !w.set.appendMode {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = filepath.WalkDir(w.set.directory, func(path string, d fs.DirEntry, err error) error {
		if codec, ours := codecOf(path); err == nil && ours && d.Type().IsRegular() && !isBackupName(path) {
			w.repairFile(path, codec)
		}
		return nil
	})
}

func (w *fileWriter) repairFile(path, codec string) {
	// O_APPEND: repairTail may terminate a foreign file's last line.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		w.logger.Warn("Cannot check the end of an existing file", zap.String("path", path), zap.Error(err))
		return
	}
	defer f.Close()
	if own, lockErr := lockExclusive(f); !own {
		// Another live collector has it open (filelock_unix.go): its tail
		// may be a record that one just acknowledged.
		w.logger.Info("Not checking the end of a file another collector is writing", zap.String("path", path), zap.Error(lockErr))
		return
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return
	}
	if _, err := w.repair(f, path, codec, st.Size()); err != nil {
		w.logger.Warn("Cannot repair the end of an existing file", zap.String("path", path), zap.Error(err))
	}
}

// repair makes f, of size bytes, end with a complete line (plain) or a
// complete member or frame (compressed), and returns its new size. A
// compressed file holding anything but complete members or frames and one
// cut last one is left as it is, with an error wrapping errForeign.
func (w *fileWriter) repair(f *os.File, path, codec string, size int64) (int64, error) {
	if codec == "" {
		return w.repairTail(f, path, size)
	}
	var end int64
	var err error
	if codec == compressionZstd {
		end, err = zstdCompleteEnd(f, size)
	} else {
		end, err = gzipCompleteEnd(f)
	}
	switch {
	case err == nil:
		return size, nil
	case !errors.Is(err, errCut):
		return 0, fmt.Errorf("%s after offset %d: %w", path, end, err)
	}
	if err := f.Truncate(end); err != nil {
		return 0, fmt.Errorf("remove cut last %s of %s: %w", codec, path, err)
	}
	w.logger.Warn("Removed a cut last compressed block left by an interrupted write",
		zap.String("path", path), zap.String("compression", codec), zap.Int64("bytes", size-end))
	return end, nil
}

// zstdCompleteEnd walks the frames of a zstd file by their headers, without
// decoding, and returns the end of the last complete one; the error is nil
// when the file ends there, wraps errCut when a frame is cut short, and
// errForeign for bytes that are not a zstd frame (RFC 8878, section 3.1).
func zstdCompleteEnd(r io.ReaderAt, size int64) (int64, error) {
	var off int64
	for off < size {
		n, err := zstdFrameLen(r, off, size)
		if err != nil {
			return off, err
		}
		off += n
	}
	return off, nil
}

// zstdFrameLen returns the length of the frame (or skippable frame) at off.
func zstdFrameLen(r io.ReaderAt, off, size int64) (int64, error) {
	var b [8]byte
	read := func(at int64, p []byte) error {
		if at+int64(len(p)) > size {
			return errCut
		}
		if _, err := r.ReadAt(p, at); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		return nil
	}
	if err := read(off, b[:4]); err != nil {
		return 0, err
	}
	magic := binary.LittleEndian.Uint32(b[:4])
	if magic&^0xF == zstdSkippableMagic {
		if err := read(off+4, b[:4]); err != nil {
			return 0, err
		}
		n := 8 + int64(binary.LittleEndian.Uint32(b[:4]))
		if off+n > size {
			return 0, errCut
		}
		return n, nil
	}
	if magic != zstdMagic {
		return 0, errForeign
	}
	if err := read(off+4, b[:1]); err != nil {
		return 0, err
	}
	fhd := b[0]
	if fhd&0x08 != 0 { // reserved bit
		return 0, errForeign
	}
	singleSegment := fhd&0x20 != 0
	header := int64(1 + [4]int{0, 1, 2, 4}[fhd&3])
	if !singleSegment {
		header++ // window descriptor
	}
	switch fcs := fhd >> 6; {
	case fcs == 0 && singleSegment:
		header++
	case fcs > 0:
		header += int64(1) << fcs // 2, 4 or 8 bytes
	}
	pos := off + 4 + header
	for {
		if err := read(pos, b[:zstdBlockHeader]); err != nil {
			return 0, err
		}
		bh := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		last, kind, n := bh&1 == 1, (bh>>1)&3, int64(bh>>3)
		switch kind {
		case 1: // RLE: one byte, repeated n times
			n = 1
		case 3:
			return 0, errForeign
		}
		pos += zstdBlockHeader + n
		if pos > size {
			return 0, errCut
		}
		if last {
			break
		}
	}
	if fhd&0x04 != 0 { // content checksum
		pos += 4
	}
	if pos > size {
		return 0, errCut
	}
	return pos - off, nil
}

// gzipCompleteEnd decodes a gzip file member by member and returns the end
// of the last complete one; the error is nil when the file ends there,
// wraps errCut when a member is cut short, and errForeign otherwise. Unlike
// zstd frames, gzip members do not say their length: finding their ends
// means decoding them.
func gzipCompleteEnd(f *os.File) (int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek: %w", err)
	}
	// countingReader is a flate.Reader, so the gzip reader reads exactly
	// each member's bytes and the count is the member's end.
	cr := &countingReader{r: bufio.NewReaderSize(f, 256<<10)}
	var zr gzip.Reader
	var end int64
	for {
		err := zr.Reset(cr)
		if err == nil {
			zr.Multistream(false)
			_, err = io.Copy(io.Discard, &zr)
		}
		switch {
		case err == nil:
			end = cr.n
		case errors.Is(err, io.EOF) && cr.n == end:
			return end, nil
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return end, errCut
		default:
			return end, fmt.Errorf("%w: %w", errForeign, err)
		}
	}
}

type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// repairTail makes an existing file end with a complete line. A write cut
// short by SIGKILL or a power loss can leave an unterminated last line; it
// is removed, so that the lines appended next are not glued to it. It
// returns the file's new size.
func (w *fileWriter) repairTail(f *os.File, path string, size int64) (int64, error) {
	var buf [64 << 10]byte
	end := size
	for end > 0 && size-end < repairWindow {
		chunk := min(end, int64(len(buf)))
		off := end - chunk
		n, err := f.ReadAt(buf[:chunk], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read end of %s: %w", path, err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := off + int64(i) + 1
			if keep == size {
				return size, nil
			}
			if err := f.Truncate(keep); err != nil {
				return 0, fmt.Errorf("remove incomplete last line of %s: %w", path, err)
			}
			w.logger.Warn("Removed an incomplete last line left by an interrupted write",
				zap.String("path", path), zap.Int64("bytes", size-keep))
			return keep, nil
		}
		end = off
	}
	if end == 0 {
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("remove incomplete line of %s: %w", path, err)
		}
		w.logger.Warn("Removed an incomplete line left by an interrupted write",
			zap.String("path", path), zap.Int64("bytes", size))
		return 0, nil
	}
	// No line end in the last repairWindow bytes: this is not a file of
	// ours. Terminate the line rather than cut someone else's data.
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return 0, fmt.Errorf("terminate last line of %s: %w", path, err)
	}
	w.logger.Warn("File did not end with a line end; added one", zap.String("path", path))
	return size + 1, nil
}
