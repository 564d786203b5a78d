// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package lensfixture is the one description, for tests, the emulator and
// the load generator, of what a NeMo Lens training job sends: the resource
// attributes of a rank (both key spellings, ranks as integers or strings),
// Megatron-LM's step span tree in both taxonomies and both trace shapes, and
// synchronous training, in which every rank's step ends together because the
// gradient all-reduce waits for the slowest rank (docs/data-model.md).
//
// It builds pdata directly (unit tests, bench/loadgen) and describes the same
// spans as plans that internal/testing/lensemu replays through the OpenTelemetry SDK
// (e2e tests), so every layer of tests sends the same shapes.
package lensfixture // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"

import (
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// GPUsPerNode is how many ranks share a node unless a Rank says otherwise:
// it sets the local rank and the host name.
const GPUsPerNode = 8

// KeyValue is one resource attribute; Value is a string or an int64.
type KeyValue struct {
	Key   string
	Value any
}

// Rank is the identity of one training process as NeMo Lens reports it.
// (Its flags are kept together so that the struct stays small enough to
// range over by value.)
type Rank struct {
	// Run is sent as nemo.run.id; "" sends none (service.instance.id then
	// says "norun").
	Run string
	// Group is sent as rl.worker_group (NeMo-RL); "" sends none.
	Group string
	// ServiceName defaults to "nemo".
	ServiceName string
	// HostName and PID override the host (Host()) and process.pid
	// (10000 + Rank), e.g. to place two jobs on one named host.
	HostName string
	PID      int32
	// GPUsPerNode sets the local rank (Rank mod it) and the host
	// (Rank / it); 0 means GPUsPerNode.
	GPUsPerNode int32
	// Rank is the global rank.
	Rank int64
	// WorldSize is the number of ranks; 0 leaves the attribute out.
	WorldSize int64
	// Extra attributes follow the identity (slurm.*, wandb.*, k8s.*, ...).
	Extra []KeyValue
	// AsString sends the rank identity as strings ("3"), as
	// OTEL_RESOURCE_ATTRIBUTES does.
	AsString bool
	// LegacyKeys sends dl.rank/dl.world_size/dl.local_rank instead of the
	// nv.dl.* spelling.
	LegacyKeys bool
	// NoLocalRank leaves the local rank out.
	NoLocalRank bool
	// NoHost leaves host.name and process.pid out.
	NoHost bool
}

func (r Rank) perNode() int64 {
	if r.GPUsPerNode > 0 {
		return int64(r.GPUsPerNode)
	}
	return GPUsPerNode
}

// LocalRank is the rank within its node.
func (r Rank) LocalRank() int64 { return r.Rank % r.perNode() }

// Host is the rank's host.name: HostName, or node000, node001, ... by
// GPUsPerNode.
func (r Rank) Host() string {
	if r.HostName != "" {
		return r.HostName
	}
	return fmt.Sprintf("node%03d", r.Rank/r.perNode())
}

// ProcessID is the rank's process.pid: PID, or 10000 + Rank.
func (r Rank) ProcessID() int64 {
	if r.PID != 0 {
		return int64(r.PID)
	}
	return 10000 + r.Rank
}

// InstanceID is the rank's service.instance.id.
func (r Rank) InstanceID() string {
	run := r.Run
	if run == "" {
		run = "norun"
	}
	return fmt.Sprintf("%s-rank%d", run, r.Rank)
}

// Attributes are the resource attributes the rank sends, in a fixed order.
func (r Rank) Attributes() []KeyValue {
	service := r.ServiceName
	if service == "" {
		service = "nemo"
	}
	attrs := []KeyValue{{attrkey.ServiceName, service}, {"service.instance.id", r.InstanceID()}}
	if r.Run != "" {
		attrs = append(attrs, KeyValue{attrkey.RunID, r.Run})
	}
	if r.Group != "" {
		attrs = append(attrs, KeyValue{attrkey.WorkerGroup, r.Group})
	}
	rank, world, local := attrkey.DLRank, attrkey.DLWorldSize, attrkey.DLLocalRank
	if r.LegacyKeys {
		rank, world, local = attrkey.LegacyDLRank, attrkey.LegacyDLWorldSize, attrkey.LegacyDLLocalRank
	}
	num := func(k string, v int64) KeyValue {
		if r.AsString {
			return KeyValue{k, strconv.FormatInt(v, 10)}
		}
		return KeyValue{k, v}
	}
	attrs = append(attrs, num(rank, r.Rank))
	if r.WorldSize > 0 {
		attrs = append(attrs, num(world, r.WorldSize))
	}
	if !r.NoLocalRank {
		attrs = append(attrs, num(local, r.LocalRank()))
	}
	if !r.NoHost {
		attrs = append(attrs, KeyValue{attrkey.HostName, r.Host()}, KeyValue{"process.pid", r.ProcessID()})
	}
	return append(attrs, r.Extra...)
}

// PutResource writes the rank's resource attributes into attrs.
func (r Rank) PutResource(attrs pcommon.Map) {
	for _, kv := range r.Attributes() {
		switch v := kv.Value.(type) {
		case int64:
			attrs.PutInt(kv.Key, v)
		case int:
			attrs.PutInt(kv.Key, int64(v))
		case string:
			attrs.PutStr(kv.Key, v)
		default:
			attrs.PutStr(kv.Key, fmt.Sprint(v))
		}
	}
}

// Fleet returns every rank of a job shaped like template (run, group, world
// size, ...), alternating what real fleets mix: odd ranks send strings, and
// every other pair of ranks the dl.* spelling.
func Fleet(template Rank) []Rank {
	out := make([]Rank, 0, template.WorldSize)
	for r := range template.WorldSize {
		p := template
		p.Rank = r
		p.AsString = r%2 == 1
		p.LegacyKeys = (r/2)%2 == 1
		out = append(out, p)
	}
	return out
}
