// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package envvarname parses the `scheme:NAME` URIs of our config providers
// that read an environment variable, with the collector's rule for names.
package envvarname // import "github.com/nemo-lens/otelcol-nemo/internal/envvarname"

import (
	"fmt"
	"regexp"
	"strings"
)

// The collector's own rule for environment variable names (confmap's envvar).
var validName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// FromURI returns NAME from "scheme:NAME", or an error naming what is wrong.
func FromURI(uri, scheme string) (string, error) {
	name, ok := strings.CutPrefix(uri, scheme+":")
	if !ok {
		return "", fmt.Errorf("%q uri is not supported by %q provider", uri, scheme)
	}
	return name, check(name)
}

func check(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("environment variable %q has an invalid name: must match %s", name, validName)
	}
	return nil
}

// WithDefault reads "scheme:NAME" like Required, or "scheme:NAME:-DEFAULT"
// (the ${env:NAME:-DEFAULT} syntax): the variable's value, or DEFAULT when
// it is unset or empty.
func WithDefault(uri, scheme string, lookup func(string) (string, bool)) (name, value string, err error) {
	rest, ok := strings.CutPrefix(uri, scheme+":")
	nameOnly, def, hasDefault := strings.Cut(rest, ":-")
	if !ok || !hasDefault {
		return Required(uri, scheme, lookup)
	}
	if err := check(nameOnly); err != nil {
		return "", "", err
	}
	if value, _ = lookup(nameOnly); value == "" {
		value = def
	}
	return nameOnly, value, nil
}

// Pair returns A and B from "scheme:A:B", two variable names.
func Pair(uri, scheme string) (a, b string, err error) {
	rest, ok := strings.CutPrefix(uri, scheme+":")
	a, b, two := strings.Cut(rest, ":")
	if !ok || !two {
		return "", "", fmt.Errorf("%q: want %s:NAME:NAME, two environment variable names", uri, scheme)
	}
	if err := check(a); err != nil {
		return "", "", err
	}
	return a, b, check(b)
}

// Required reads the variable that "scheme:NAME" names with lookup, and
// fails naming it, with the fix, when it is unset or empty: the rule of the
// providers whose value a config cannot do without (API keys, endpoints).
func Required(uri, scheme string, lookup func(string) (string, bool)) (name, value string, err error) {
	name, err = FromURI(uri, scheme)
	if err != nil {
		return "", "", err
	}
	value, _ = lookup(name)
	if value == "" {
		return name, "", fmt.Errorf("environment variable %s is required by this config but is not set (or is empty): export %s=... before starting the collector", name, name)
	}
	return name, value, nil
}
