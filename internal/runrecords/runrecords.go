// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package runrecords names what the nemo_steps connector says about runs
// and what its readers rely on (the nemo_view exporter, dashboards, alert
// rules): the step gauges' names, and the event names and attributes of the
// stall and goodput log records. One definition, written by nemo_steps and
// read by nemo_view: components never import each other.
package runrecords // import "github.com/nemo-lens/otelcol-nemo/internal/runrecords"

import "github.com/nemo-lens/otelcol-nemo/internal/attrkey"

// The step gauges: one point per rank and step, with the rank's identity as
// point attributes (nemo.run.id, the rank, host.name).
//
//nolint:gosec // G101: metric names, no credential
const (
	StepDuration        = "nemo.step.duration"
	StepBusyTime        = "nemo.step.busy_time"
	StepWaitTime        = "nemo.step.wait_time"
	StepRelativeScore   = "nemo.step.relative_score"
	StepIndividualScore = "nemo.step.individual_score"
	StepStragglers      = "nemo.step.stragglers"
	// StepIteration is the attribute of the busy time point's exemplar that
	// names the step's iteration (never a point attribute: one series per
	// step would explode every backend).
	StepIteration = attrkey.MegatronIteration
	// RankStepGauges is how many of these gauges a rank step has, all with
	// the same run, rank and time, and in one request but where a request
	// ends: StepDuration to StepIndividualScore.
	RankStepGauges = 5
)

// The goodput metrics, written at every tick while a run is live: the
// settled time by category (a cumulative sum from the run's first span,
// with TimeCategory), the goodput so far (a gauge stamped with the run's
// latest span end) and every rank's straggler time (a cumulative sum, with
// the rank's identity).
const (
	RunTime           = "nemo.run.time"
	RunGoodput        = "nemo.run.goodput"
	RankStragglerTime = "nemo.rank.straggler_time"
)

// The records' event names (the event.name attribute).
const (
	EventName    = "event.name"
	EventStalled = "nemo.run.stalled"
	EventResumed = "nemo.run.resumed"
	EventGoodput = "nemo.run.goodput"
)

// The stall records' attributes.
const (
	StallKind      = "nemo.stall.kind"
	StallIteration = "nemo.stall.iteration"
	StallRanks     = "nemo.stall.culprit_ranks"
	StallHosts     = "nemo.stall.culprit_hosts"
	StallLostHosts = "nemo.stall.lost_hosts"
	StallSeconds   = "nemo.stall.seconds"
	StallStage     = "nemo.stall.first_stage"
)

// The goodput record's attributes; TimePrefix + a category name
// (goodput.Category) is that category's seconds.
const (
	Goodput        = "nemo.goodput"
	TimePrefix     = "nemo.time."
	TimeCategory   = "nemo.time.category"
	WallSeconds    = "nemo.run.wall_seconds"
	Attempts       = "nemo.run.attempts"
	TopRanks       = "nemo.goodput.top_ranks"
	GoodputFinal   = "nemo.goodput.final"
	TopRankRank    = "rank"
	TopRankHost    = "host"
	TopRankSeconds = "seconds"
)
