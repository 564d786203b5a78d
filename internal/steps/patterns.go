// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"errors"
	"fmt"
	"strings"
)

// The errors of ParsePatterns, each wrapped in a message that names the
// entry ("entry 0 (\"a*b\"): ..."): callers and tests match them with
// errors.Is.
var (
	ErrEmptyPattern     = errors.New("is empty")
	ErrStarNotAtEnd     = errors.New(`"*" is only allowed at the end, as in "megatron.grad_sync.*"`)
	ErrMatchesEverySpan = errors.New(`would match every span; name a prefix, as in "megatron.grad_sync.*"`)
)

// Patterns matches span names against a list of exact names and prefixes
// (a name ending in "*"). The zero value matches nothing.
type Patterns struct {
	exact    map[string]struct{}
	prefixes []string
}

// ParsePatterns reads a list such as ["megatron.grad_sync.*",
// "megatron.optimizer_step"]. A "*" anywhere but at the end, an empty
// pattern and a lone "*" (which would make every span a wait) are errors
// naming the entry.
func ParsePatterns(list []string) (Patterns, error) {
	p := Patterns{exact: make(map[string]struct{}, len(list))}
	for i, s := range list {
		s = strings.TrimSpace(s)
		prefix, isPrefix := strings.CutSuffix(s, "*")
		switch {
		case s == "":
			return Patterns{}, fmt.Errorf("entry %d %w", i, ErrEmptyPattern)
		case strings.Contains(prefix, "*"):
			return Patterns{}, fmt.Errorf("entry %d (%q): %w", i, s, ErrStarNotAtEnd)
		case isPrefix && prefix == "":
			return Patterns{}, fmt.Errorf("entry %d (%q) %w", i, s, ErrMatchesEverySpan)
		case isPrefix:
			p.prefixes = append(p.prefixes, prefix)
		default:
			p.exact[s] = struct{}{}
		}
	}
	return p, nil
}

// Match reports whether name is one of the exact names or starts with one of
// the prefixes. It does not allocate.
func (p Patterns) Match(name string) bool {
	if _, ok := p.exact[name]; ok {
		return true
	}
	for _, prefix := range p.prefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// Empty reports whether the patterns match nothing.
func (p Patterns) Empty() bool { return len(p.exact) == 0 && len(p.prefixes) == 0 }
