// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepsummary is the contract between the two tiers: what an agent
// sends a gateway of the ranks its strategy drops, so that the gateway's
// step engine judges every rank of a run without receiving every span.
// One definition, written by rank_strategy on the agents (summarize) and
// read by the step engine on the gateways (internal/steps); components
// never import each other.
//
// Summaries travel as OTLP spans, under the rank's identity (IdentityKeys
// and the keys that name its rank and run, copied from its resource, so
// that they are routed by nemo.run.id like the rest of the run), in a scope
// of their own: name ScopeName, version Version. Each summary span keeps the
// name, trace and span ids, parent id and times of the span it stands
// for, and says what it is in AttrKind:
//
//   - "step": one rank-step: the rank's step span, with AttrIteration,
//     AttrWait (its time waiting in gradient sync and pipeline receives, the
//     union of its wait spans within the step, in ns) and AttrForwards (the
//     micro-batch forwards it ended in the step), and the step span's
//     megatron.num_microbatches and dl.pipeline_parallel.rank when it has
//     them.
//   - "phase": a span outside every step (the run-long job span, start-up,
//     checkpoint load and save, evaluation): its envelope, no attributes.
//   - "progress": a progress beat, sent while a rank completes no step: the
//     latest span of the next iteration the rank ended (in step order), with
//     AttrForwards and AttrBackwards, the micro-batch forwards and backwards
//     it ended in that iteration, and its dl.pipeline_parallel.rank.
//
// A reader refuses a scope of another version (it counts and logs it,
// naming both versions): a gateway must be upgraded before its agents.
package stepsummary // import "github.com/nemo-lens/otelcol-nemo/internal/stepsummary"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// The contract's names.
const (
	// ScopeName is the instrumentation scope of summary spans.
	ScopeName = "otelcol-nemo/step-summary"
	// Version is the scope version this build writes and reads.
	Version = "1"

	// AttrKind says what a summary span stands for: KindStep, KindPhase or
	// KindProgress, as a string.
	AttrKind = "nemo.summary.kind"
	// AttrIteration is a step summary's iteration (int).
	AttrIteration = "nemo.summary.iteration"
	// AttrWait is a step summary's wait time in ns (int).
	AttrWait = "nemo.summary.wait_ns"
	// AttrForwards and AttrBackwards are a progress beat's micro-batch
	// counts (int).
	AttrForwards  = "nemo.summary.forwards"
	AttrBackwards = "nemo.summary.backwards"
)

// IdentityKeys are the attributes of a rank's resource a summary's
// resource carries besides the keys that name the rank and its run (the
// writer's rank, world size, local rank and group keys): what a gateway's
// step metrics, stall detector and goodput read of a rank (service, host,
// process, pipeline size). The rest of the resource (SLURM, W&B,
// Kubernetes, ...) stays with the rank's own telemetry.
var IdentityKeys = slices.Concat(
	[]string{attrkey.ServiceName, attrkey.HostName, "service.instance.id", "process.pid", "nv.dl.run.uuid"},
	rankattr.PipelineSizeKeys,
)

// PutIdentity makes dst hold the attributes of keys that from has, and
// reports whether it changed (a rank's process restarted, say); it copies
// nothing when dst holds them already.
func PutIdentity(dst, from pcommon.Map, keys []string) bool {
	present := 0
	same := true
	for _, k := range keys {
		v, ok := from.Get(k)
		if !ok {
			continue
		}
		present++
		if same {
			w, ok := dst.Get(k)
			same = ok && w.Equal(v)
		}
	}
	if same && dst.Len() == present {
		return false
	}
	dst.Clear()
	dst.EnsureCapacity(present)
	for _, k := range keys {
		if v, ok := from.Get(k); ok {
			v.CopyTo(dst.PutEmpty(k))
		}
	}
	return true
}

// Kind is what a summary span stands for.
type Kind uint8

const (
	// KindUnknown: not a summary this version knows.
	KindUnknown Kind = iota
	// KindStep: one rank-step.
	KindStep
	// KindPhase: a span outside every step, its envelope.
	KindPhase
	// KindProgress: a progress beat.
	KindProgress
)

var kindNames = [...]string{KindUnknown: "", KindStep: "step", KindPhase: "phase", KindProgress: "progress"}

// String is the kind as AttrKind spells it.
func (k Kind) String() string { return kindNames[k] }

func parseKind(s string) Kind {
	for k, name := range kindNames {
		if name != "" && name == s {
			return Kind(k)
		}
	}
	return KindUnknown
}

// IsScope says whether a scope holds summaries (of any version).
func IsScope(ss ptrace.ScopeSpans) bool { return ss.Scope().Name() == ScopeName }

// Has says whether a resource holds a summary scope.
func Has(rs ptrace.ResourceSpans) bool {
	for _, ss := range rs.ScopeSpans().All() {
		if IsScope(ss) {
			return true
		}
	}
	return false
}

// Only says whether every scope of a resource holds summaries, as in the
// resources an agent writes them into.
func Only(rs ptrace.ResourceSpans) bool {
	for _, ss := range rs.ScopeSpans().All() {
		if !IsScope(ss) {
			return false
		}
	}
	return true
}

// NewScope appends a summary scope of this version to rs and returns its
// span list.
func NewScope(rs ptrace.ResourceSpans) ptrace.SpanSlice {
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(ScopeName)
	ss.Scope().SetVersion(Version)
	return ss.Spans()
}

// CopyEnvelope copies what every summary keeps of the span it stands for:
// its name, ids, parent id and times.
func CopyEnvelope(dst, from ptrace.Span) {
	dst.SetName(from.Name())
	dst.SetTraceID(from.TraceID())
	dst.SetSpanID(from.SpanID())
	dst.SetParentSpanID(from.ParentSpanID())
	dst.SetStartTimestamp(from.StartTimestamp())
	dst.SetEndTimestamp(from.EndTimestamp())
}

// envelope makes dst the summary of kind of from, its envelope copied.
func envelope(dst, from ptrace.Span, kind Kind) {
	CopyEnvelope(dst, from)
	dst.Attributes().PutStr(AttrKind, kind.String())
}

// copyAttr copies one attribute of from, when it has it.
func copyAttr(dst, from pcommon.Map, key string) {
	if v, ok := from.Get(key); ok {
		v.CopyTo(dst.PutEmpty(key))
	}
}

// WriteStep makes dst the summary of a rank's step span, of iteration,
// which waited wait ns and ended forwards micro-batch forwards.
func WriteStep(dst, step ptrace.Span, iteration, wait, forwards int64) {
	envelope(dst, step, KindStep)
	attrs := dst.Attributes()
	attrs.PutInt(AttrIteration, iteration)
	attrs.PutInt(AttrWait, max(wait, 0))
	attrs.PutInt(AttrForwards, max(forwards, 0))
	copyAttr(attrs, step.Attributes(), attrkey.MegatronNumMicrobatches)
	copyAttr(attrs, step.Attributes(), attrkey.PipelineRank)
}

// WritePhase makes dst the envelope of a span outside every step.
func WritePhase(dst, span ptrace.Span) { envelope(dst, span, KindPhase) }

// Counts are the micro-batch forwards and backwards a rank ended: in a
// step (a step summary), or in the iteration after its last step (a
// progress beat).
type Counts struct {
	Forwards, Backwards int64
}

// WriteProgress makes dst a progress beat: latest is the latest span of
// the next iteration the rank ended, stage the rank's pipeline stage (-1:
// unknown).
func WriteProgress(dst, latest ptrace.Span, c Counts, stage int64) {
	envelope(dst, latest, KindProgress)
	attrs := dst.Attributes()
	attrs.PutInt(AttrForwards, c.Forwards)
	attrs.PutInt(AttrBackwards, c.Backwards)
	if stage >= 0 {
		attrs.PutInt(attrkey.PipelineRank, stage)
	}
}

// Item is what a reader makes of a summary span.
type Item struct {
	Kind Kind
	// Iteration and Wait, of a step summary.
	Iteration, Wait int64
	// Counts, of a step summary (its forwards) and a progress beat.
	Counts Counts
}

// Read reads a summary span of this version; false when its kind is not
// one this version knows, or a step summary lacks its iteration.
func Read(s ptrace.Span) (Item, bool) {
	attrs := s.Attributes()
	v, ok := attrs.Get(AttrKind)
	if !ok {
		return Item{}, false
	}
	it := Item{Kind: parseKind(v.Str())}
	switch it.Kind {
	case KindStep:
		iteration, ok := attrs.Get(AttrIteration)
		if !ok || iteration.Type() != pcommon.ValueTypeInt {
			return Item{}, false
		}
		it.Iteration = iteration.Int()
		if w, ok := attrs.Get(AttrWait); ok && w.Type() == pcommon.ValueTypeInt {
			it.Wait = max(w.Int(), 0)
		}
		it.Counts.Forwards = intAttr(attrs, AttrForwards)
	case KindProgress:
		it.Counts = Counts{Forwards: intAttr(attrs, AttrForwards), Backwards: intAttr(attrs, AttrBackwards)}
	case KindPhase:
	default:
		return Item{}, false
	}
	return it, true
}

func intAttr(attrs pcommon.Map, key string) int64 {
	if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeInt {
		return max(v.Int(), 0)
	}
	return 0
}
