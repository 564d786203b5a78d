// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
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
