// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
)

// backupTimeFormat is the time in rotated file names, as in lumberjack
// and the contrib file exporter: traces-2025-01-31T12-00-00.000.jsonl.
const backupTimeFormat = "2006-01-02T15-04-05.000"

// rotate moves the current file aside under a timestamped name and opens a
// new one, then prunes old rotated files.
func (w *fileWriter) rotate(of *outFile) error {
	if err := of.f.Close(); err != nil {
		of.tel.failed(opClose)
		w.logger.Warn("Closing file for rotation failed", zap.String("path", of.path), zap.Error(err))
	}
	of.f = nil
	if err := w.moveAside(of.path); err != nil {
		return err
	}
	w.seen[of.path] = true
	if err := w.open(of); err != nil {
		return err
	}
	w.prune(of.path, of.tel)
	return nil
}

// moveAside renames path to its rotated name.
func (w *fileWriter) moveAside(path string) error {
	t := w.now()
	if !w.set.localTime {
		t = t.UTC()
	}
	prefix, ext := splitBackupName(path)
	var backup string
	for range 1000 {
		backup = prefix + "-" + t.Format(backupTimeFormat) + ext
		if _, err := os.Lstat(backup); errors.Is(err, os.ErrNotExist) {
			break
		}
		t = t.Add(time.Millisecond)
	}
	if err := os.Rename(path, backup); err != nil {
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	if w.set.fsync {
		syncDir(filepath.Dir(path))
	}
	return nil
}

// splitBackupName splits /d/traces.jsonl.gz into /d/traces and .jsonl.gz.
func splitBackupName(path string) (prefix, ext string) {
	comp := ""
	for _, s := range compressionSuffix {
		if strings.HasSuffix(path, s) {
			comp = s
			path = strings.TrimSuffix(path, s)
			break
		}
	}
	ext = filepath.Ext(path)
	if strings.ContainsRune(ext, filepath.Separator) {
		ext = ""
	}
	return strings.TrimSuffix(path, ext), ext + comp
}

// isBackupName says whether path is a rotated file's name:
// <prefix>-<backupTimeFormat><ext>.
func isBackupName(path string) bool {
	prefix, _ := splitBackupName(path)
	_, _, ok := cutBackupTime(prefix, time.UTC)
	return ok
}

// cutBackupTime splits a rotated name without its extension,
// <prefix>-<backupTimeFormat>, into the prefix and the time.
func cutBackupTime(name string, loc *time.Location) (prefix string, t time.Time, ok bool) {
	n := len(name) - len(backupTimeFormat) - 1
	if n < 1 || name[n] != '-' {
		return "", time.Time{}, false
	}
	t, err := time.ParseInLocation(backupTimeFormat, name[n+1:], loc)
	return name[:n], t, err == nil
}

// prune removes rotated files of path beyond rotation::max_backups or older
// than rotation::max_days. Their records were acknowledged when written:
// each removal is logged at WARN and counted (tel: the signal that rotated).
func (w *fileWriter) prune(path string, tel *telemetry) {
	if w.set.maxBackups == 0 && w.set.maxDays == 0 {
		return
	}
	prefix, ext := splitBackupName(path)
	dir, base := filepath.Split(prefix)
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.logger.Warn("Listing rotated files failed", zap.String("directory", dir), zap.Error(err))
		return
	}
	type backup struct {
		name string
		t    time.Time
		size int64
	}
	loc := time.UTC
	if w.set.localTime {
		loc = time.Local
	}
	var backups []backup
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ext) {
			continue
		}
		of, t, ok := cutBackupTime(strings.TrimSuffix(name, ext), loc)
		if !ok || of != base {
			continue
		}
		var size int64
		if info, err := e.Info(); err == nil {
			size = info.Size()
		}
		backups = append(backups, backup{name: name, t: t, size: size})
	}
	sort.Slice(backups, func(i, j int) bool { return backups[i].t.After(backups[j].t) })
	cutoff := w.now().Add(-time.Duration(w.set.maxDays) * 24 * time.Hour)
	for i, b := range backups {
		tooMany := w.set.maxBackups > 0 && i >= w.set.maxBackups
		tooOld := w.set.maxDays > 0 && b.t.Before(cutoff)
		if !tooMany && !tooOld {
			continue
		}
		removed := filepath.Join(dir, b.name)
		if err := os.Remove(removed); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				w.logger.Warn("Removing rotated file failed", zap.String("path", removed), zap.Error(err))
			}
			continue
		}
		reason, key := pruneMaxBackups, "rotation::max_backups"
		if tooOld {
			reason, key = pruneMaxDays, "rotation::max_days"
		}
		tel.prunedFile(reason)
		w.logger.Warn("Retention removed a rotated file: the records in it, acknowledged when written, are gone",
			zap.String("path", removed), zap.Int64("bytes", b.size), zap.String("by", key),
			zap.String("fix", "raise "+key+" (0: keep every file) to keep rotated files longer"))
	}
}

// reopenAside moves the file of aside, whole, and opens a new one in its
// place.
func (w *fileWriter) reopenAside(of *outFile) error {
	if err := w.moveAside(of.path); err != nil {
		of.tel.failed(opOpen)
		return classifyFileError(fmt.Errorf("move aside %s: %w", of.path, err))
	}
	w.seen[of.path] = true
	return w.open(of)
}
