// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// Deciding: which launch a rank belongs to, when a launch is one job or
// two, and what each of its ranks is told (its run id, held, refused).

// decide returns the run id for a resource whose sender id is the
// per-process id id and that matched no job key, or the launch it must wait
// for. An id is decided once, when first seen or when its launch is, and
// keeps that decision while it is remembered:
//
//   - the first id seen for a launch key (or the first after the last
//     launch's window, when its rank is taken there, or after its hold,
//     when it is complete) starts a launch and keeps its value, which
//     becomes the launch's run id; it is never held;
//   - an id whose rank is free in a pending launch joins it and waits for
//     its decision: merged (the launch's id) or ambiguous (its own);
//   - an id whose rank is taken in a pending launch makes it ambiguous:
//     no id of it is merged (two jobs launched together:
//     concurrent_launches);
//   - an id whose rank is free in a decided launch still within its window
//     joins it at once;
//   - an id whose rank is taken in a decided launch within the window (of a
//     complete launch: within its hold) refuses it and every later newcomer
//     to that launch (two jobs, or a restart: rank_collision);
//   - an id after the window whose rank is missing from the launch may be a
//     late rank or another job's: refused (late).
//
// Resources without host.name, world size or rank, or whose rank is not
// below the world size or differs from the local rank (a multi-node job),
// are refused outright.
func (s *singleNode) decide(id string, attrs pcommon.Map) verdict {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(s.nextSweep) {
		s.expire(now)
	}
	if d, ok := s.ids[id]; ok {
		return s.known(id, d, now)
	}

	key, rank, reason := readIdentity(attrs)
	r := refusal{reason: reason, key: key, rank: rank, id: id}
	if reason != reasonNone {
		return s.refuse(r, s.warnOnce(key, reason, now), now)
	}
	l := s.launches[key]
	if l != nil && now.Sub(l.lastSeen) > s.idle {
		l = nil
	}
	if l != nil && l.pending {
		s.resolve(l, now)
	}
	switch {
	case l == nil:
		return s.found(key, rank, id, now)
	case l.ranks[rank] == id:
		// A member forgotten under the id bound: its launch remembers it.
		return s.join(l, rank, id, now)
	case l.pending:
		other, taken := l.ranks[rank]
		if !taken {
			return s.join(l, rank, id, now)
		}
		s.refuseAll(l)
		r.reason, r.launchID, r.members, r.other = reasonConcurrentLaunches, l.id, len(l.ranks), other
		return s.refuse(r, true, now)
	case l.complete && !l.collided && now.Sub(l.first) > s.hold:
		// Every rank is taken, and the launch was first seen longer than the
		// hold ago: the next job on this host, or a restart.
		return s.found(key, rank, id, now)
	case now.Sub(l.first) <= s.window:
		other, taken := l.ranks[rank]
		if !taken && !l.collided {
			return s.join(l, rank, id, now)
		}
		warn := !l.collided
		l.collided = true
		r.reason, r.launchID, r.members, r.other = reasonRankCollision, l.id, len(l.ranks), other
		if l.ambiguous {
			r.reason = reasonConcurrentLaunches
		}
		return s.refuse(r, warn, now)
	default:
		if _, taken := l.ranks[rank]; taken {
			// The rank is back with a new id after the window: a new launch
			// (the next job on this host, or a restart).
			return s.found(key, rank, id, now)
		}
		warn := !l.warnedLate
		l.warnedLate = true
		r.reason, r.launchID, r.members, r.after = reasonLate, l.id, len(l.ranks), now.Sub(l.first)
		return s.refuse(r, warn, now)
	}
}

// known answers for an id seen before.
func (s *singleNode) known(id string, d idDecision, now time.Time) verdict {
	d.lastSeen = now
	l := d.launch
	if l != nil {
		if l.lastSeen.Before(now) {
			l.lastSeen = now
		}
		if l.pending {
			s.resolve(l, now)
		}
		if l.pending && id != l.id {
			s.ids[id] = d
			return verdict{pending: l}
		}
	}
	v := verdict{runID: d.runID, counted: d.due}
	d.due = reasonNone
	s.ids[id] = d
	if l != nil && !l.pending && !l.noted && !l.ambiguous && len(l.ranks) >= 2 {
		l.noted = true
		v.joined = l
	}
	return v
}

// readIdentity reads the launch key and rank of a resource, or why it has
// none usable.
func readIdentity(attrs pcommon.Map) (launchKey, int64, unreconciledReason) {
	var k launchKey
	if v, ok := attrs.Get(attrkey.ServiceName); ok && v.Type() == pcommon.ValueTypeStr {
		k.service = v.Str()
	}
	if v, ok := attrs.Get(attrkey.HostName); ok && v.Type() == pcommon.ValueTypeStr {
		k.host = strings.TrimSpace(v.Str())
	}
	if k.host == "" {
		return k, -1, reasonNoHostName
	}
	ws, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldWorldSize])
	if status != rankattr.Valid || ws == 0 {
		return k, -1, reasonNoWorldSize
	}
	k.worldSize = ws
	rank, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldRank])
	if status != rankattr.Valid {
		return k, -1, reasonNoRank
	}
	if rank >= ws {
		return k, rank, reasonRankOutOfRange
	}
	// On one node torchrun's local rank equals the rank; where it differs,
	// the job spans nodes and its other ranks are on other hosts.
	if local, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldLocalRank]); status == rankattr.Valid && local != rank {
		return k, rank, reasonMultiNode
	}
	if v, ok := attrs.Get(attrkey.WorkerGroup); ok && v.Type() == pcommon.ValueTypeStr {
		k.workerGroup = v.Str()
	}
	return k, rank, reasonNone
}

func (s *singleNode) found(key launchKey, rank int64, id string, now time.Time) verdict {
	id = strings.Clone(id)
	l := &launch{
		key: key.clone(), id: id, first: now, lastNew: now, lastSeen: now,
		ranks: map[int64]string{rank: id}, pending: true, decided: make(chan struct{}),
	}
	s.launches[l.key] = l
	s.undecided[l] = struct{}{}
	s.remember(id, id, l, now)
	if s.loop == nil {
		s.loop = clock.StartLoop(s.clock, clock.TickEvery(s.settle), s.tick)
	}
	// The first id is the launch's run id and its own: never held.
	return verdict{runID: id}
}

func (s *singleNode) join(l *launch, rank int64, id string, now time.Time) verdict {
	id = strings.Clone(id)
	if _, member := l.ranks[rank]; !member && l.pending {
		l.lastNew = now
	}
	l.ranks[rank] = id
	l.lastSeen = now
	runID := l.id
	if l.ambiguous {
		runID = id
	}
	s.remember(id, runID, l, now)
	if l.pending {
		return verdict{pending: l}
	}
	v := verdict{runID: runID}
	if !l.noted && !l.ambiguous && len(l.ranks) >= 2 {
		l.noted = true
		v.joined = l
	}
	return v
}

// resolve decides a pending launch when its world size is complete and
// settle passed since its last new id, or when its hold expired: its ids
// are merged (they were remembered with the launch's id already).
func (s *singleNode) resolve(l *launch, now time.Time) {
	complete := int64(len(l.ranks)) == l.key.worldSize
	if (!complete || now.Sub(l.lastNew) < s.settle) && now.Sub(l.first) < s.hold {
		return
	}
	l.pending, l.complete = false, complete
	s.release(l)
}

// refuseAll decides a pending launch ambiguous: every id keeps its own
// value, and each one but the first (which had it all along) is counted.
func (s *singleNode) refuseAll(l *launch) {
	l.pending, l.ambiguous, l.collided = false, true, true
	for _, id := range l.ranks {
		if d, ok := s.ids[id]; ok && d.launch == l && id != l.id {
			d.runID, d.due = id, reasonConcurrentLaunches
			s.ids[id] = d
		}
	}
	s.release(l)
}

func (s *singleNode) release(l *launch) {
	delete(s.undecided, l)
	close(l.decided)
}

func (s *singleNode) refuse(r refusal, warn bool, now time.Time) verdict {
	id := strings.Clone(r.id)
	s.remember(id, id, nil, now)
	return verdict{runID: id, counted: r.reason, warn: warn, refusal: r}
}

func (s *singleNode) remember(id, runID string, l *launch, now time.Time) {
	if len(s.ids) >= s.maxIDs {
		s.evictOldest()
	}
	s.ids[id] = idDecision{runID: runID, launch: l, lastSeen: now}
}

// warnOnce reports whether a warning not tied to a launch is due for
// (host, service, reason).
func (s *singleNode) warnOnce(key launchKey, reason unreconciledReason, now time.Time) bool {
	return s.warned.Allow(warnKey{host: key.host, service: key.service, reason: reason}, now)
}
