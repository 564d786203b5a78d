// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pathvalue

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAppendSanitises(t *testing.T) {
	for in, want := range map[string]string{
		"run-1":                  "run-1",
		"..":                     "_.",
		".hidden":                "_hidden",
		"a/b":                    "a_b",
		`a\b`:                    "a_b",
		"tab\there":              "tab_here",
		"nul\x00":                "nul_",
		"bad\xff":                "bad_",
		"日本":                     "日本",
		strings.Repeat("é", 100): strings.Repeat("é", 64),
	} {
		assert.Equal(t, want, string(Append(nil, in)), "%q", in)
	}
}
