// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// The errors of parseRankList, each wrapped in a message that quotes the
// entry: `range "9-3" ends before it starts`.
var (
	errEmptyRankEntry = errors.New("is empty")
	errNotARank       = errors.New("is not a rank or a range of ranks (a non-negative integer, or first-last)")
	errRangeBackwards = errors.New("ends before it starts")
)

// rankRange is an inclusive range of ranks.
type rankRange struct{ first, last int64 }

// rankList is a sorted list of disjoint, non-adjacent rank ranges.
type rankList []rankRange

// parseRankList reads "0,7,64-71": comma-separated ranks and inclusive
// ranges, spaces allowed. Overlapping and adjacent entries are merged.
func parseRankList(s string) (rankList, error) {
	var ranges rankList
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("entry %d %w in %q", i+1, errEmptyRankEntry, s)
		}
		r, err := parseRankRange(entry)
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, r)
	}
	slices.SortFunc(ranges, func(a, b rankRange) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	merged := ranges[:1]
	for _, r := range ranges[1:] {
		last := &merged[len(merged)-1]
		if r.first <= last.last+1 {
			last.last = max(last.last, r.last)
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

func parseRankRange(entry string) (rankRange, error) {
	lo, hi, isRange := strings.Cut(entry, "-")
	first, ok := rankattr.ParseString(lo)
	if !ok {
		return rankRange{}, fmt.Errorf("%q %w", entry, errNotARank)
	}
	if !isRange {
		return rankRange{first, first}, nil
	}
	last, ok := rankattr.ParseString(hi)
	if !ok {
		return rankRange{}, fmt.Errorf("%q %w", entry, errNotARank)
	}
	if last < first {
		return rankRange{}, fmt.Errorf("range %q %w", entry, errRangeBackwards)
	}
	return rankRange{first, last}, nil
}

func (l rankList) contains(rank int64) bool {
	i := sort.Search(len(l), func(i int) bool { return l[i].last >= rank })
	return i < len(l) && l[i].first <= rank
}
