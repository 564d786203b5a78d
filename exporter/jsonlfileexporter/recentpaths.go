// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import "time"

// pathWindow is how long a path counts against max_distinct_paths after
// its last write: between one and two windows.
const pathWindow = time.Hour

// recentPaths bounds the distinct paths written to recently. Paths are kept
// in two generations of one pathWindow each; a path written to in either is
// known, and a new path is admitted while fewer than limit are known. So a
// long-lived collector keeps admitting the runs of a busy cluster as old
// runs go quiet, while a sender inventing run ids fills the bound once, with
// the memory of limit paths. Not thread-safe: the file writer's lock guards
// it.
type recentPaths struct {
	limit     int // 0: no bound
	cur, prev map[string]struct{}
	since     time.Time // when cur began
}

func newRecentPaths(limit int) recentPaths {
	return recentPaths{limit: limit, cur: map[string]struct{}{}, prev: map[string]struct{}{}}
}

// admit reports whether records may be written to rel at now, noting the
// write.
func (p *recentPaths) admit(rel string, now time.Time) bool {
	if p.limit <= 0 {
		return true
	}
	if now.Sub(p.since) >= pathWindow {
		p.prev, p.cur, p.since = p.cur, make(map[string]struct{}, len(p.cur)), now
	}
	if _, ok := p.cur[rel]; ok {
		return true
	}
	if _, ok := p.prev[rel]; ok {
		delete(p.prev, rel)
		p.cur[rel] = struct{}{}
		return true
	}
	if len(p.cur)+len(p.prev) >= p.limit {
		return false
	}
	p.cur[rel] = struct{}{}
	return true
}
