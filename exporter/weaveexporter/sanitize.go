// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Weave turns every attribute map (resource, span, event, link) into a nested
// object by splitting keys on dots: "slurm.job.id" becomes
// {"slurm": {"job": {"id": ...}}}. A map holding both a key k and a key k.sub
// cannot be nested (k would be a value and an object at once): Weave rejects
// the span, or the whole request for a resource attribute, or silently loses
// one of the values.
//
// The one rule applied here: every key k that another key extends (k.sub)
// moves to k._value, so that the value and its sub-keys nest side by side:
// slurm.job.id + slurm.job.id.raw becomes slurm.job.id._value +
// slurm.job.id.raw. The longer keys never change, so keys that carry meaning
// to Weave (wandb.*, gen_ai.*) keep working. If k._value is taken, k._value2,
// k._value3, ... are tried. Keys are processed in byte order, so the result
// does not depend on the order of attributes.
const valueSuffix = "._value"

// keyRename is one key moved to resolve a conflict.
type keyRename struct {
	from, to string
}

// maxStackKeys is how many keys conflict detection handles without allocating.
const maxStackKeys = 48

// mapHasConflict reports whether m, plus the key extra when it is not empty
// (an attribute about to be added), holds a key k together with a key k.sub.
func mapHasConflict(m pcommon.Map, extra string) bool {
	n := m.Len()
	if extra != "" {
		n++
	}
	if n < 2 {
		return false
	}
	var buf [maxStackKeys]string
	keys := buf[:0]
	for k := range m.All() {
		keys = append(keys, k)
	}
	if extra != "" {
		keys = append(keys, extra)
	}
	return keysConflict(keys)
}

// keysConflict reports whether a key in keys is a dotted prefix of another.
func keysConflict(keys []string) bool {
	// lengths has bit n set when some key is n bytes long (n < 64): a dot
	// at position n can only close a prefix that is a key if that bit is
	// set, which skips the comparisons for almost every attribute map.
	var lengths uint64
	for _, k := range keys {
		if len(k) < 64 {
			lengths |= 1 << len(k)
		}
	}
	for _, k := range keys {
		for i := strings.IndexByte(k, '.'); i >= 0; {
			prefix := k[:i]
			if i >= 64 || lengths&(1<<i) != 0 {
				for _, other := range keys {
					if len(other) == len(prefix) && other == prefix {
						return true
					}
				}
			}
			next := strings.IndexByte(k[i+1:], '.')
			if next < 0 {
				break
			}
			i += next + 1
		}
	}
	return false
}

// conflictRenames returns the renames that make keys nestable, ordered by
// the key renamed. It returns nil when there is no conflict.
func conflictRenames(keys []string) []keyRename {
	present := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		present[k] = struct{}{}
	}
	var leaves []string
	for _, k := range keys {
		for i := 0; i < len(k); i++ {
			if k[i] != '.' {
				continue
			}
			if _, ok := present[k[:i]]; ok && !slices.Contains(leaves, k[:i]) {
				leaves = append(leaves, k[:i])
			}
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	slices.Sort(leaves)
	renames := make([]keyRename, 0, len(leaves))
	for _, leaf := range leaves {
		to := leaf + valueSuffix
		for n := 2; taken(present, to); n++ {
			to = leaf + valueSuffix + strconv.Itoa(n)
		}
		delete(present, leaf)
		present[to] = struct{}{}
		renames = append(renames, keyRename{from: leaf, to: to})
	}
	return renames
}

// taken reports whether key, or a key extending it, is present.
func taken(present map[string]struct{}, key string) bool {
	if _, ok := present[key]; ok {
		return true
	}
	for k := range present {
		if len(k) > len(key) && k[len(key)] == '.' && strings.HasPrefix(k, key) {
			return true
		}
	}
	return false
}

// renameConflicts applies conflictRenames to m, which must be a private
// copy, keeping the order of the attributes.
func renameConflicts(m pcommon.Map) []keyRename {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	renames := conflictRenames(keys)
	if len(renames) == 0 {
		return nil
	}
	renamed := pcommon.NewMap()
	renamed.EnsureCapacity(m.Len())
	for k, v := range m.All() {
		for _, r := range renames {
			if r.from == k {
				k = r.to
				break
			}
		}
		v.CopyTo(renamed.PutEmpty(k))
	}
	renamed.MoveTo(m)
	return renames
}

// spanHasConflict reports whether the attributes of span, of its events or
// of its links need renaming; extra is a key about to be added to the span.
func spanHasConflict(span ptrace.Span, extra string) bool {
	if mapHasConflict(span.Attributes(), extra) {
		return true
	}
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		if mapHasConflict(events.At(i).Attributes(), "") {
			return true
		}
	}
	links := span.Links()
	for i := 0; i < links.Len(); i++ {
		if mapHasConflict(links.At(i).Attributes(), "") {
			return true
		}
	}
	return false
}

// renamedKey records where a rename happened, for the log.
type renamedKey struct {
	where string
	keyRename
}

// renameSpanConflicts renames conflicting keys in span, a private copy, and
// in its events and links.
func renameSpanConflicts(span ptrace.Span) []renamedKey {
	var out []renamedKey
	for _, r := range renameConflicts(span.Attributes()) {
		out = append(out, renamedKey{where: "span", keyRename: r})
	}
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		for _, r := range renameConflicts(events.At(i).Attributes()) {
			out = append(out, renamedKey{where: "event", keyRename: r})
		}
	}
	links := span.Links()
	for i := 0; i < links.Len(); i++ {
		for _, r := range renameConflicts(links.At(i).Attributes()) {
			out = append(out, renamedKey{where: "link", keyRename: r})
		}
	}
	return out
}
