// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import "github.com/nemo-lens/otelcol-nemo/internal/runrecords"

// The names the processor writes and reads: the attributes and events of
// its records and points (internal/runrecords, which nemo_view reads too),
// and the resource keys that tell one process of a rank from the next.

// Attribute names of the stall records and gauges.
const (
	attrEventName      = runrecords.EventName
	attrStallKind      = runrecords.StallKind
	attrStallIteration = runrecords.StallIteration
	attrStallRanks     = runrecords.StallRanks
	attrStallHosts     = runrecords.StallHosts
	attrStallLostHosts = runrecords.StallLostHosts
	attrStallSeconds   = runrecords.StallSeconds
	attrStallStage     = runrecords.StallStage
	eventStalled       = runrecords.EventStalled
	eventResumed       = runrecords.EventResumed
)

// Attribute names of the goodput record and metrics.
const (
	eventGoodput       = runrecords.EventGoodput
	attrGoodput        = runrecords.Goodput
	attrTimePrefix     = runrecords.TimePrefix
	attrTimeCategory   = runrecords.TimeCategory
	attrWallSeconds    = runrecords.WallSeconds
	attrAttempts       = runrecords.Attempts
	attrTopRanks       = runrecords.TopRanks
	attrGoodputFinal   = runrecords.GoodputFinal
	attrTopRankRank    = runrecords.TopRankRank
	attrTopRankHost    = runrecords.TopRankHost
	attrTopRankSeconds = runrecords.TopRankSeconds
)

// Resource keys of a rank's process.
const (
	attrProcessPID  = "process.pid"
	attrServiceInst = "service.instance.id"
	attrRunUUID     = "nv.dl.run.uuid"
)
