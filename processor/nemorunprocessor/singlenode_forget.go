// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"slices"
	"time"
)

// Forgetting: ids idle past the idle timeout, and the least recently seen
// when maxTrackedIDs is reached.

// expire drops ids and launches idle for longer than the idle timeout, and
// warnings due again.
func (s *singleNode) expire(now time.Time) {
	for id, d := range s.ids {
		if now.Sub(d.lastSeen) > s.idle {
			delete(s.ids, id)
		}
	}
	for k, l := range s.launches {
		if now.Sub(l.lastSeen) > s.idle {
			delete(s.launches, k)
		}
	}
	s.warned.Sweep(now)
	s.nextSweep = now.Add(sweepInterval)
}

// evictOldest forgets the least recently seen eighth of the ids, and the
// launches none of whose members was seen since.
func (s *singleNode) evictOldest() {
	seen := make([]time.Time, 0, len(s.ids))
	for _, d := range s.ids {
		seen = append(seen, d.lastSeen)
	}
	slices.SortFunc(seen, time.Time.Compare)
	cutoff := seen[len(seen)/8]
	for id, d := range s.ids {
		if !d.lastSeen.After(cutoff) {
			delete(s.ids, id)
		}
	}
	for k, l := range s.launches {
		if !l.lastSeen.After(cutoff) {
			delete(s.launches, k)
		}
	}
}
