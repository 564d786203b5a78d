// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

// Skip says why a step or wait span did not count in a rank's step.
type Skip uint8

const (
	// SkipMissingRank and SkipInvalidRank: its resource has no usable rank.
	SkipMissingRank Skip = iota
	SkipInvalidRank
	// SkipMissingIteration: a step span without a usable iteration.
	SkipMissingIteration
	// SkipInvalidDuration: a step span that ends before it starts, or a
	// wait span that does.
	SkipInvalidDuration
	// SkipLateWait: a wait span whose step was decided before it came.
	SkipLateWait
	// SkipWaitExpired: a wait span whose step span never came (span_wait,
	// the budget, or shutdown).
	SkipWaitExpired
	// SkipSummaryVersion: a step summary from an agent of another contract
	// version (internal/stepsummary), which this collector cannot read.
	SkipSummaryVersion
	// SkipSummaryUnreadable: a summary span of an unknown kind, or a step
	// summary without an iteration.
	SkipSummaryUnreadable
	// NumSkips sizes arrays indexed by Skip.
	NumSkips
)

// Expiry says why kept spans gave up waiting for their step span.
type Expiry uint8

const (
	// ExpiredWait: span_wait is over.
	ExpiredWait Expiry = iota
	// ExpiredBudget: the engine's budget ran out.
	ExpiredBudget
	// ExpiredShutdown: the collector stops.
	ExpiredShutdown
	// NumExpiries sizes arrays indexed by Expiry.
	NumExpiries
)

// Stats count what an engine did since the last count, for the component's
// own telemetry.
type Stats struct {
	// Skipped are step and wait spans that did not count, by reason.
	Skipped [NumSkips]int64
	// Decided are steps decided for the first time, by cause (a step
	// reopened by a late rank is counted once).
	Decided [NumCauses]int64
	// RanksMissing are ranks of a step's world that had not reported their
	// step span when its decision_wait was over.
	RanksMissing int64
	// OpenRankSteps is the change in rank steps held in open steps.
	OpenRankSteps int64
	// Expired are kept spans that gave up waiting for their step span, by
	// why.
	Expired [NumExpiries]int64
	// Waiting is the change in a holder's spans the engine holds while
	// they wait for their step span.
	Waiting int64
	// Queued are the spans a holder passed on (Output) queued to send;
	// SendFailed those the next consumer refused (sent again at the next
	// tick).
	Queued, SendFailed int64
}
