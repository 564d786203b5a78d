// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T, dir string, opts Options) *Journal {
	t.Helper()
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 1 << 30
	}
	j, err := Open(dir, opts)
	require.NoError(t, err)
	return j
}

// readAll reads and finishes every record the journal holds now, in
// batches of at most maxItems items.
func readAll(t *testing.T, j *Journal, maxItems int) (payload string, batches int) {
	t.Helper()
	for j.Held() > 0 {
		b, ok := j.Read(maxItems, 0)
		require.True(t, ok)
		payload += string(b.Payload)
		batches++
		j.Done(b)
	}
	return payload, batches
}

func TestAppendReadInOrderInBatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	j := open(t, dir, Options{SegmentBytes: 4 * (headerLen + 3)}) // 4 records a segment
	for i := range 10 {
		require.NoError(t, j.Append(fmt.Appendf(nil, "<%d>", i), 3, nil))
	}
	got, batches := readAll(t, j, 7) // two records of 3 items per batch, none across segments
	assert.Equal(t, "<0><1><2><3><4><5><6><7><8><9>", got)
	assert.Equal(t, 5, batches)
	require.NoError(t, j.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "segments all of whose records are done are removed")
}

func TestOneRecordPastMaxItemsIsStillRead(t *testing.T) {
	j := open(t, t.TempDir(), Options{})
	require.NoError(t, j.Append([]byte("big"), 100, nil))
	b, ok := j.Read(10, 0)
	require.True(t, ok)
	assert.Equal(t, "big", string(b.Payload))
	assert.Equal(t, 100, b.Items)
}

func TestFullRefusesUntilDone(t *testing.T) {
	j := open(t, t.TempDir(), Options{MaxBytes: 2 * (headerLen + 4)})
	require.NoError(t, j.Append([]byte("aaaa"), 1, nil))
	require.NoError(t, j.Append([]byte("bbbb"), 1, nil))
	require.ErrorIs(t, j.Append([]byte("cccc"), 1, nil), ErrFull)
	b, _ := j.Read(1, 0)
	j.Done(b)
	require.NoError(t, j.Append([]byte("cccc"), 1, nil))
}

// A restart reads back what was not done: after a Close or a kill, what
// the side file does not note as done (Close notes it, and Done once a
// second); after a node crash that lost the side file, every record still
// on disk.
func TestRestartSendsWhatWasNotDone(t *testing.T) {
	for name, want := range map[string]string{
		"closed":         "<2><3><4><5>",
		"killed":         "<2><3><4><5>",
		"side file lost": "<0><1><2><3><4><5>",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var held int64
			j := open(t, dir, Options{SegmentBytes: 1 << 20, Held: func(d int64) { held += d }})
			for i := range 6 {
				require.NoError(t, j.Append(fmt.Appendf(nil, "<%d>", i), 1, nil))
			}
			b1, _ := j.Read(2, 0) // <0><1>
			_, _ = j.Read(2, 0)   // <2><3>, never done
			b3, _ := j.Read(1, 0) // <4>
			j.Done(b1)
			j.Done(b3) // out of order: only the prefix <0><1> counts at a restart
			assert.Equal(t, 3*(headerLen+3), int(held))
			switch name {
			case "closed":
				require.NoError(t, j.Close())
			case "side file lost":
				require.NoError(t, os.Remove(segPath(dir, 0)+".done"))
			}
			var lost []string
			j2 := open(t, dir, Options{Lost: func(p string, _, _ int64) { lost = append(lost, p) }})
			got, _ := readAll(t, j2, 100)
			assert.Equal(t, want, got)
			assert.Empty(t, lost)
			// Appends go on in a new segment after the old ones.
			require.NoError(t, j2.Append([]byte("<6>"), 1, nil))
			got, _ = readAll(t, j2, 100)
			assert.Equal(t, "<6>", got)
		})
	}
}

// A record torn by a crash (or damaged) is reported lost with what
// follows it in its segment; the records before it are read back.
func TestTornRecordIsReportedLost(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Options{})
	for i := range 3 {
		require.NoError(t, j.Append(fmt.Appendf(nil, "<%d>", i), 1, nil))
	}
	j.Stop()
	path := segPath(dir, 0)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[2*(headerLen+3)+headerLen] ^= 0xff // damage <2>'s payload
	require.NoError(t, os.WriteFile(path, append(data, 1, 2, 3), 0o600))

	var lost [][2]int64
	j2 := open(t, dir, Options{Lost: func(_ string, from, to int64) { lost = append(lost, [2]int64{from, to}) }})
	got, _ := readAll(t, j2, 100)
	assert.Equal(t, "<0><1>", got)
	assert.Equal(t, [][2]int64{{2 * (headerLen + 3), int64(len(data)) + 3}}, lost)
}

// Appends from many goroutines each return once fsynced, sharing fsyncs.
func TestConcurrentAppends(t *testing.T) {
	j := open(t, t.TempDir(), Options{SegmentBytes: 4096})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				assert.NoError(t, j.Append(fmt.Appendf(nil, "%d-%d;", g, i), 1, nil))
			}
		})
	}
	done := make(chan int)
	go func() {
		n := 0
		for n < 1600 {
			b, ok := j.Read(64, 0)
			if !ok {
				break
			}
			n += b.Items
			j.Done(b)
		}
		done <- n
	}()
	wg.Wait()
	assert.Equal(t, 1600, <-done)
	assert.Zero(t, j.Held())
	require.NoError(t, j.Close())
}

func TestStopEndsReads(t *testing.T) {
	j := open(t, t.TempDir(), Options{})
	out := make(chan bool)
	go func() {
		_, ok := j.Read(1, 0)
		out <- ok
	}()
	j.Stop()
	assert.False(t, <-out)
	assert.Error(t, j.Append([]byte("x"), 1, nil))
}

// A failed write (here: the segment's file closed under it, as a full
// disk fails a write) is refused and cut off; the next append starts a
// new segment and every acknowledged record reads back.
func TestFailedWriteStartsANewSegment(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Options{})
	require.NoError(t, j.Append([]byte("<0>"), 1, nil))
	j.mu.Lock()
	_ = j.segs[0].f.Close()
	j.mu.Unlock()
	require.Error(t, j.Append([]byte("<1>"), 1, nil))
	require.NoError(t, j.Append([]byte("<2>"), 1, nil))
	j.Stop()
	j2 := open(t, dir, Options{})
	got, _ := readAll(t, j2, 100)
	assert.Equal(t, "<0><2>", got)
}

// Records appended with their memory form are handed out in it, without
// reading the file, while every record of a batch has one; a batch with a
// record without one is read from the file. Either way reading lets go of
// the memory taken; a record past the memory's limit is not kept.
func TestRecordsInMemory(t *testing.T) {
	dir := t.TempDir()
	mem := NewMemory(6)
	j := open(t, dir, Options{Memory: mem})
	require.NoError(t, j.Append([]byte("<0>"), 1, "zero"))
	require.NoError(t, j.Append([]byte("<1>"), 1, "one"))
	assert.EqualValues(t, 6, mem.used.Load())
	b, ok := j.Read(2, 0)
	require.True(t, ok)
	assert.Equal(t, []any{"zero", "one"}, b.Mem)
	assert.Nil(t, b.Payload, "not read from the file")
	assert.Zero(t, mem.used.Load())
	j.Done(b)

	require.NoError(t, j.Append([]byte("<2>"), 1, "two"))
	require.NoError(t, j.Append([]byte("<3>"), 1, "three"))
	require.NoError(t, j.Append([]byte("<4>"), 1, "four")) // past the limit: not kept
	assert.EqualValues(t, 6, mem.used.Load())
	b, ok = j.Read(3, 0)
	require.True(t, ok)
	assert.Nil(t, b.Mem)
	assert.Equal(t, "<2><3><4>", string(b.Payload))
	assert.Zero(t, mem.used.Load(), "<2>'s and <3>'s memory let go of")
	j.Done(b)
}

// A reader waits up to its wait for a fuller batch while the segment is
// appended to, and takes what there is then; a full batch goes at once.
func TestReadWaitsForAFullerBatch(t *testing.T) {
	j := open(t, t.TempDir(), Options{})
	require.NoError(t, j.Append([]byte("<0>"), 1, nil))
	start := time.Now()
	out := make(chan Batch)
	go func() {
		b, _ := j.Read(3, time.Minute)
		out <- b
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, j.Append([]byte("<1>"), 1, nil))
	require.NoError(t, j.Append([]byte("<2>"), 1, nil)) // 3 items: a full batch
	b := <-out
	assert.Equal(t, 3, b.Items)
	assert.Less(t, time.Since(start), time.Minute)

	require.NoError(t, j.Append([]byte("<3>"), 1, nil))
	start = time.Now()
	b, _ = j.Read(3, 50*time.Millisecond)
	assert.Equal(t, 1, b.Items, "what there was once the oldest was 50ms old")
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
}
