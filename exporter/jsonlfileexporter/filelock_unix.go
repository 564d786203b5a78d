// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"errors"
	"os"
	"syscall"
)

// Two collectors may share one output directory (a SLURM job's shared
// file system, two gateways on one volume). Each holds a shared flock(2) on
// every file it has open for writing; the start-up repair and the repair of
// a file being opened cut a file's tail only under an exclusive lock, so a
// collector never truncates a file another live collector is appending to
// (the tail it would cut may be a record the other one just fsynced and
// acknowledged). A collector that dies releases its locks with its file
// descriptors, so its cut tail is repaired by the next one to open the file.
// Locks are advisory and local to the host for most network file systems.

// lockExclusive takes an exclusive lock on f without waiting; false when
// another open file description holds a lock on it.
func lockExclusive(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lockShared takes (or converts to) a shared lock on f, waiting while
// another writer repairs it under an exclusive lock (a short wait).
func lockShared(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
}
