// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/goodput"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

// goodputRecordDigits rounds the goodput in the record.
const goodputRecordDigits = 4

// goodputReport is what a goodput record says of a run.
type goodputReport struct {
	times    goodput.Times
	wall     int64
	attempts int
	stalls   int
	top      []rankCost
	// final: the run ended (or the collector stops).
	final bool
}

// goodputRecord appends a run's goodput record, under a resource of the
// run's own attributes (so that jsonl_file writes it to the run's logs
// file).
func goodputRecord(logs plog.Logs, labels *rankLabels, rep goodputReport, now time.Time) {
	rl := logs.ResourceLogs().AppendEmpty()
	attrs := rl.Resource().Attributes()
	if labels.service != "" {
		attrs.PutStr(attrkey.ServiceName, labels.service)
	}
	putLabels(attrs, labels.group)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	rec := sl.LogRecords().AppendEmpty()
	rec.SetTimestamp(pcommon.NewTimestampFromTime(now))
	rec.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
	rec.SetSeverityNumber(plog.SeverityNumberInfo)
	rec.SetSeverityText("INFO")
	ra := rec.Attributes()
	putLabels(ra, labels.group)
	ra.PutStr(attrEventName, eventGoodput)
	ra.PutDouble(attrGoodput, round(rep.times.Goodput(), goodputRecordDigits))
	for c, ns := range rep.times {
		ra.PutDouble(attrTimePrefix+goodput.Category(c).String(), milliseconds(ns))
	}
	ra.PutDouble(attrWallSeconds, milliseconds(rep.wall))
	ra.PutInt(attrAttempts, int64(rep.attempts))
	ra.PutBool(attrGoodputFinal, rep.final)
	top := ra.PutEmptySlice(attrTopRanks)
	for _, r := range rep.top {
		m := top.AppendEmpty().SetEmptyMap()
		m.PutInt(attrTopRankRank, r.rank)
		if r.host != "" {
			m.PutStr(attrTopRankHost, r.host)
		}
		m.PutDouble(attrTopRankSeconds, milliseconds(r.ns))
	}
	rec.Body().SetStr(goodputMessage(runName(labels), rep))
}

// milliseconds is ns as seconds, to the millisecond.
func milliseconds(ns int64) float64 { return round(float64(ns)/1e9, 3) }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// goodputMessage says a run's goodput in words: the share that did useful
// work, then every other category with a share, largest first.
func goodputMessage(run string, rep goodputReport) string {
	total := rep.times.Total()
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: goodput %s of %s", run, percent(rep.times[goodput.Productive], total), formatDuration(time.Duration(total)))
	others := make([]goodput.Category, 0, goodput.NumCategories)
	for c := range goodput.NumCategories {
		if c != goodput.Productive && rep.times[c] > 0 {
			others = append(others, c)
		}
	}
	slices.SortStableFunc(others, func(a, c goodput.Category) int { return cmp.Compare(rep.times[c], rep.times[a]) })
	for _, c := range others {
		fmt.Fprintf(&b, "; %s %s", strings.ReplaceAll(c.String(), "_", " "), percent(rep.times[c], total))
		switch c {
		case goodput.Straggler:
			if len(rep.top) > 0 {
				t := rep.top[0]
				fmt.Fprintf(&b, " (rank %d", t.rank)
				if t.host != "" {
					fmt.Fprintf(&b, " on %s", t.host)
				}
				fmt.Fprintf(&b, ": %s)", percent(t.ns, total))
			}
		case goodput.Stalled:
			fmt.Fprintf(&b, " (%s)", plural(rep.stalls, "hang", "hangs"))
		case goodput.LostProgress, goodput.Restart:
			fmt.Fprintf(&b, " (%s)", plural(rep.attempts-1, "restart", "restarts"))
		}
	}
	return b.String()
}

func percent(part, total int64) string {
	if total <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(total))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// formatDuration is a run's length as people say it: 3h12m, 4m05s, 42.5s.
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return strconv.FormatFloat(roundSeconds(d), 'f', -1, 64) + "s"
}

// rankCost is a rank and the straggler time it cost.
type rankCost struct {
	rank int64
	ns   int64
	host string
}
