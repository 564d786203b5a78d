// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// barrierPoll is how often a rank waiting in the all-reduce looks again.
const barrierPoll = 5 * time.Millisecond

// fileBarrier is the gradient all-reduce of ranks in separate processes,
// possibly on separate hosts sharing a filesystem (as SLURM nodes share the
// job's directory): at iteration it, each rank creates <dir>/<it>/<rank>
// and waits until the directory holds one file per rank of the world. A
// rank that never arrives (its process or node is gone) leaves the others
// waiting, as NCCL leaves them waiting, until stop ends.
type fileBarrier struct {
	dir         string
	rank, world int
	stop        context.Context
}

func (b fileBarrier) wait(_ context.Context, it int) error {
	dir := filepath.Join(b.dir, strconv.Itoa(it))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(b.rank)), nil, 0o644); err != nil { //nolint:gosec // G306: read by the job's other ranks
		return err
	}
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(entries) >= b.world {
			return nil
		}
		select {
		case <-b.stop.Done():
			return fmt.Errorf("stopped in the all-reduce of iteration %d with %d of %d ranks arrived", it, len(entries), b.world)
		case <-time.After(barrierPoll):
		}
	}
}
