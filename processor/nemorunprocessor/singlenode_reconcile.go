// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// reconcileSingleNode handles a per-process sender id with no job key. Only
// this path takes a lock; explicit ids and job-keyed resources never get here.
// It returns outcomeHeld, with t.held set, when the id's launch is not decided
// yet: the resource must wait for it and then be assigned again.
func (p *runProcessor) reconcileSingleNode(attrs pcommon.Map, raw pcommon.Value, sender string, t *tally) outcome {
	if p.single == nil {
		normaliseSenderRunID(raw, sender)
		return outcomeKept
	}
	if _, upstream := attrs.Get(attrkey.RunIDSource); upstream {
		// An upstream nemo_run already chose this id.
		normaliseSenderRunID(raw, sender)
		return outcomeKept
	}
	v := p.single.decide(sender, attrs)
	if v.pending != nil {
		t.held = v.pending
		return outcomeHeld
	}
	t.unreconciled[v.counted]++
	if v.warn {
		p.logRefusal(v.refusal)
	}
	if v.joined != nil {
		p.logger.Info("Per-process run ids of one single-node launch share the id of its first rank",
			zap.String("run_id", v.joined.id), zap.String(attrkey.HostName, v.joined.key.host),
			zap.String(attrkey.ServiceName, v.joined.key.service), zap.Int64("world_size", v.joined.key.worldSize),
			zap.Duration("single_node_window", p.single.window),
			zap.String("note", "the id is chosen by this collector: other collectors, or this one after a restart, may choose another"),
			zap.String("fix", singleNodeFix))
	}
	if v.runID == sender {
		normaliseSenderRunID(raw, sender)
		return outcomeKept
	}
	replaceRunID(attrs, raw, true, v.runID, sourceSingleNode)
	return outcomeReconciled
}

// singleNodeFix is how a user gives all ranks of a job one id.
const singleNodeFix = "to give every rank of a job one run id, export NEMO_LENS_RUN_ID=<id> in the job's environment before launching it " +
	"(every rank inherits it), or run one collector per job with nemo_run override: true " +
	"(NEMO_RUN_OVERRIDE=true with the presets) and the job's id in that collector's NEMO_LENS_RUN_ID"

var refusalMessages = [numReasons]string{
	reasonNoHostName:     "Per-process run id kept: the resource has no host.name, so the ranks of its job cannot be grouped and each stays a run of its own",
	reasonNoWorldSize:    "Per-process run id kept: the resource has no world size (nv.dl.world_size or dl.world_size), so the ranks of its job cannot be grouped and each stays a run of its own",
	reasonNoRank:         "Per-process run id kept: the resource has no rank (nv.dl.rank or dl.rank), so the ranks of its job cannot be grouped and each stays a run of its own",
	reasonRankOutOfRange: "Per-process run id kept: its rank is not below its world size",
	reasonMultiNode:      "Per-process run id kept: its rank differs from its local rank, so its job spans several hosts and its ranks cannot be grouped by host",
	reasonRankCollision: "Per-process run ids kept: two processes on one host sent the same rank with different ids after their launch was decided " +
		"(two jobs launched together, or a restart); no further id joins this launch, ids that joined it before stay joined",
	reasonLate: "Per-process run id kept: first seen after single_node_window of the launch missing its rank, so it may be another job's",
	reasonConcurrentLaunches: "Per-process run ids kept: two processes on one host sent the same rank with different ids before their launch was decided " +
		"(two jobs launched together, or a restart), so its ranks cannot be told from another job's: none of them is merged, each stays a run of its own",
}

func (p *runProcessor) logRefusal(r refusal) {
	fields := []zap.Field{
		zap.String("reason", reasonNames[r.reason]),
		zap.String(attrkey.RunID, r.id),
		zap.String(attrkey.HostName, r.key.host),
		zap.String(attrkey.ServiceName, r.key.service),
	}
	if r.key.worldSize > 0 {
		fields = append(fields, zap.Int64("world_size", r.key.worldSize))
	}
	if r.rank >= 0 {
		fields = append(fields, zap.Int64("rank", r.rank))
	}
	if r.launchID != "" {
		fields = append(fields, zap.String("launch_run_id", r.launchID), zap.Int("launch_ranks", r.members))
	}
	if r.other != "" {
		fields = append(fields, zap.String("rank_taken_by", r.other))
	}
	if r.reason == reasonLate {
		fields = append(fields, zap.Duration("after_first_rank", r.after), zap.Duration("single_node_window", p.single.window))
	}
	fields = append(fields, zap.String("fix", singleNodeFix))
	p.logger.Warn(refusalMessages[r.reason], fields...)
}
