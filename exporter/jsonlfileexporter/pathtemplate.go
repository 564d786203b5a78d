// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/pathvalue"
)

// pathTemplate is a file path relative to the output directory in which
// `{attribute.key}` is replaced with the value of that resource attribute.
type pathTemplate struct {
	parts []templatePart
	// static is the path when the template has no attribute reference.
	static string
}

type templatePart struct {
	literal string
	attr    string // the attribute key when this part is a reference
}

// The errors of a path template and of missing_attribute_value; the config
// puts the key in front ("traces_path: must name a file, got ...").
var (
	errEmptyPath        = errors.New("must not be empty")
	errAbsolutePath     = errors.New("must be relative to directory")
	errNotAFile         = errors.New("must name a file")
	errUnmatchedBrace   = errors.New("unmatched '}'")
	errUnclosedBrace    = errors.New("unclosed '{'")
	errEmptyReference   = errors.New("empty attribute reference '{}'")
	errSlashInReference = errors.New("must not contain '/'")
	errEscapingPath     = errors.New("must stay inside directory (no '..' element)")
	errControlInPath    = errors.New(`must not contain control characters or '\'`)
	errPathValue        = fmt.Errorf(`must be at most %d bytes of UTF-8 without '/', '\', control characters or a leading '.'`, pathvalue.MaxBytes)
)

func parsePathTemplate(s string) (*pathTemplate, error) {
	if s == "" {
		return nil, errEmptyPath
	}
	if filepath.IsAbs(s) {
		return nil, fmt.Errorf("%w, got %q", errAbsolutePath, s)
	}
	if strings.HasSuffix(s, "/") {
		return nil, fmt.Errorf("%w, got %q", errNotAFile, s)
	}
	// Drop empty and "." elements so that every template names its files
	// by one clean relative path; files are told apart by that path.
	elems := strings.Split(s, "/")
	kept := elems[:0]
	for _, e := range elems {
		if e != "" && e != "." {
			kept = append(kept, e)
		}
	}
	t := &pathTemplate{}
	rest := strings.Join(kept, "/")
	if rest == "" {
		return nil, fmt.Errorf("%w, got %q", errNotAFile, s)
	}
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("%w in %q", errUnmatchedBrace, s)
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, fmt.Errorf("%w in %q", errUnclosedBrace, s)
		}
		key := rest[open+1 : open+1+end]
		if strings.TrimSpace(key) == "" {
			return nil, fmt.Errorf("%w in %q", errEmptyReference, s)
		}
		if strings.ContainsRune(key, '/') {
			return nil, fmt.Errorf("attribute reference {%s} %w in %q", key, errSlashInReference, s)
		}
		t.parts = append(t.parts, templatePart{attr: key})
		rest = rest[open+1+end+1:]
	}

	// Attribute values can never contain a separator or start with a dot, so
	// checking the template with a plain stand-in value checks every path it
	// can produce.
	var sample []byte
	static := true
	for _, p := range t.parts {
		if p.attr != "" {
			sample = append(sample, 'x')
			static = false
		} else {
			sample = append(sample, p.literal...)
		}
	}
	path := string(sample)
	switch {
	case filepath.IsAbs(path):
		return nil, fmt.Errorf("%w, got %q", errAbsolutePath, s)
	case !filepath.IsLocal(path):
		return nil, fmt.Errorf("%w, got %q", errEscapingPath, s)
	case strings.ContainsFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return nil, fmt.Errorf("%w, got %q", errControlInPath, s)
	}
	if static {
		t.static = path
	}
	return t, nil
}

// render appends the path for a resource with attributes attrs to dst.
// Missing or empty attributes take fallback.
func (t *pathTemplate) render(dst []byte, attrs pcommon.Map, fallback string) []byte {
	if t.static != "" {
		return append(dst, t.static...)
	}
	for _, p := range t.parts {
		if p.attr == "" {
			dst = append(dst, p.literal...)
			continue
		}
		v, ok := attrs.Get(p.attr)
		if !ok {
			dst = pathvalue.Append(dst, fallback)
			continue
		}
		var s string
		switch v.Type() {
		case pcommon.ValueTypeStr:
			s = v.Str()
		case pcommon.ValueTypeInt:
			dst = strconv.AppendInt(dst, v.Int(), 10)
			continue
		case pcommon.ValueTypeEmpty:
		default:
			s = v.AsString()
		}
		if s == "" {
			s = fallback
		}
		dst = pathvalue.Append(dst, s)
	}
	return dst
}

// checkPathValue reports whether s can be used as is in a path.
func checkPathValue(s string) error {
	if s == "" {
		return errEmptyPath
	}
	if string(pathvalue.Append(nil, s)) != s {
		return fmt.Errorf("%w, got %q", errPathValue, s)
	}
	return nil
}
