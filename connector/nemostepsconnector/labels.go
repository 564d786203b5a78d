// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/boundedmap"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// label is one data point attribute, copied out of the batch: the batch
// belongs to the pipeline, and a later consumer may move or change it.
type label struct {
	key   string
	str   string
	num   int64
	isNum bool
}

func (l label) equal(v pcommon.Value) bool {
	if l.isNum {
		return v.Type() == pcommon.ValueTypeInt && v.Int() == l.num
	}
	return v.Type() != pcommon.ValueTypeInt && v.AsString() == l.str
}

func labelOf(key string, v pcommon.Value) label {
	if v.Type() == pcommon.ValueTypeInt {
		return label{key: key, num: v.Int(), isNum: true}
	}
	return label{key: key, str: v.AsString()}
}

// rankLabels are what identifies a rank's series: its run and group, its
// rank and where it runs. Nothing else of the rank's resource is kept, so
// that a restart (a new process.pid or service.instance.id) continues the
// same series.
type rankLabels struct {
	// service is the ranks' service.name, the resource of the data points.
	service string
	// group holds the group_keys present: the run's identity, the only
	// attributes of the stragglers count.
	group []label
	// node holds the rank and the local rank, under the first of rank_keys
	// and local_rank_keys whichever key a rank sent them under (one series
	// per rank in a job that mixes nv.dl.* and dl.*), and host.name.
	node []label
}

// host is the rank's host.name, "" when it has none.
func (l *rankLabels) host() string {
	for _, n := range l.node {
		if n.key == attrkey.HostName {
			return n.str
		}
	}
	return ""
}

// identity reads the labels of a rank's series from its resource.
type identity struct {
	rankKeys, localRankKeys, groupKeys []string
}

func newIdentity(cfg *Config) identity {
	return identity{rankKeys: cfg.RankKeys, localRankKeys: cfg.LocalRankKeys, groupKeys: cfg.GroupKeys}
}

// rankIndex keeps every rank's labels, read from its resource at its step
// spans, for its points, and every run's (its latest rank's), for the run's
// points and records.
type rankIndex struct {
	id    identity
	ranks *boundedmap.Map[steps.Rank, *rankLabels]
	runs  *boundedmap.Map[uint64, *rankLabels]
	// The resource read last (steps.Resource.Seq) and its rank's labels:
	// a resource holds many step spans of one rank.
	seq uint64
	cur *rankLabels
	// The host and process identity of the resource read last (procSeq),
	// which the stall and goodput feeds both read once per resource.
	procSeq             uint64
	procHost, procIdent string
}

func newRankIndex(cfg *Config) *rankIndex {
	return &rankIndex{
		id:    newIdentity(cfg),
		ranks: boundedmap.New[steps.Rank, *rankLabels](steps.MaxRememberedRanks),
		runs:  boundedmap.New[uint64, *rankLabels](maxRememberedRuns),
	}
}

// atStep reads the labels of the resource's rank at one of its step spans,
// once per resource.
func (x *rankIndex) atStep(r *steps.Resource) *rankLabels {
	if x.cur != nil && x.seq == r.Seq {
		return x.cur
	}
	prev, _ := x.ranks.Get(r.Rank)
	l := x.id.labelsFor(prev, r.Attrs, r.Rank.Rank)
	if l != prev {
		x.ranks.Put(r.Rank, l)
	}
	x.runs.Put(r.Group, l)
	x.seq, x.cur = r.Seq, l
	return l
}

// run is a run's labels (its group's), false when none of its ranks
// reported a step yet.
func (x *rankIndex) run(group uint64) (*rankLabels, bool) { return x.runs.Get(group) }

// get is a rank's labels, false when none is known.
func (x *rankIndex) get(rank steps.Rank) (*rankLabels, bool) { return x.ranks.Get(rank) }

// labelsFor returns prev when it still describes the resource (the common
// case: one comparison per attribute, no allocation) and new labels
// otherwise, e.g. when a rank restarted on another host.
func (id identity) labelsFor(prev *rankLabels, attrs pcommon.Map, rank int64) *rankLabels {
	if prev != nil && id.matches(prev, attrs, rank) {
		return prev
	}
	l := &rankLabels{group: make([]label, 0, len(id.groupKeys)), node: make([]label, 0, 3)}
	if v, ok := attrs.Get(attrkey.ServiceName); ok {
		l.service = v.AsString()
	}
	for _, k := range id.groupKeys {
		if v, ok := attrs.Get(k); ok {
			l.group = append(l.group, labelOf(k, v))
		}
	}
	l.node = append(l.node, label{key: id.rankKeys[0], num: rank, isNum: true})
	if v, ok := attrs.Get(attrkey.HostName); ok {
		l.node = append(l.node, labelOf(attrkey.HostName, v))
	}
	if local, _, status := rankattr.Lookup(attrs, id.localRankKeys); status == rankattr.Valid {
		l.node = append(l.node, label{key: id.localRankKeys[0], num: local, isNum: true})
	}
	return l
}

func (id identity) matches(l *rankLabels, attrs pcommon.Map, rank int64) bool {
	if v, ok := attrs.Get(attrkey.ServiceName); (ok && v.AsString() != l.service) || (!ok && l.service != "") {
		return false
	}
	i := 0
	for _, k := range id.groupKeys {
		if v, ok := attrs.Get(k); ok {
			if i >= len(l.group) || l.group[i].key != k || !l.group[i].equal(v) {
				return false
			}
			i++
		}
	}
	if i != len(l.group) {
		return false
	}
	want := 1
	if n := l.node[0]; n.num != rank {
		return false
	}
	if v, ok := attrs.Get(attrkey.HostName); ok {
		if len(l.node) <= want || l.node[want].key != attrkey.HostName || !l.node[want].equal(v) {
			return false
		}
		want++
	}
	if local, _, status := rankattr.Lookup(attrs, id.localRankKeys); status == rankattr.Valid {
		if len(l.node) <= want || l.node[want].num != local {
			return false
		}
		want++
	}
	return want == len(l.node)
}

// process is the host and process identity (processOf) of the resource,
// read once per resource.
func (x *rankIndex) process(r *steps.Resource) (host, process string) {
	if x.procSeq != r.Seq || x.procIdent == "" {
		x.procSeq = r.Seq
		x.procHost, x.procIdent = processOf(r.Attrs)
	}
	return x.procHost, x.procIdent
}

// processOf is the resource's host and the identity of its process, which
// tells a restarted rank from the one before: its service.instance.id
// (NeMo Lens: run and rank, the same after a restart), the run uuid newer
// releases mint per restart (nv.dl.run.uuid), and its host and pid.
func processOf(attrs pcommon.Map) (host, process string) {
	if v, ok := attrs.Get(attrkey.HostName); ok {
		host = v.AsString()
	}
	b := make([]byte, 0, 96)
	for _, key := range processKeys {
		if v, ok := attrs.Get(key); ok {
			switch v.Type() {
			case pcommon.ValueTypeStr:
				b = append(b, v.Str()...)
			case pcommon.ValueTypeInt:
				b = strconv.AppendInt(b, v.Int(), 10)
			default:
				b = append(b, v.AsString()...)
			}
		}
		b = append(b, '/')
	}
	b = append(b, host...)
	return host, string(b)
}

// processKeys tell one process of a rank from the next.
var processKeys = []string{attrServiceInst, attrRunUUID, attrProcessPID}

// putLabels writes labels as data point attributes.
func putLabels(m pcommon.Map, ls []label) {
	for _, l := range ls {
		if l.isNum {
			m.PutInt(l.key, l.num)
		} else {
			m.PutStr(l.key, l.str)
		}
	}
}
