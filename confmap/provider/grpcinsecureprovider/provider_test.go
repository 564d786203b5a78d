// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package grpcinsecureprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetrieve(t *testing.T) {
	for _, tt := range []struct {
		endpoint, insecure string
		want               bool
	}{
		{"http://jaeger:4317", "", true},
		{"http://jaeger:4317", "false", true},
		{"https://otlp.example.com", "", false},
		{"https://otlp.example.com", "true", false},
		{"jaeger:4317", "", false},
		{"jaeger:4317", "false", false},
		{"jaeger:4317", "true", true},
	} {
		env := map[string]string{"EP": tt.endpoint, "INSECURE": tt.insecure}
		p := &provider{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		r, err := p.Retrieve(t.Context(), "grpcinsecure:EP:INSECURE", nil)
		require.NoError(t, err)
		v, err := r.AsRaw()
		require.NoError(t, err)
		assert.Equal(t, tt.want, v, "%s with INSECURE=%q", tt.endpoint, tt.insecure)
	}
}

func TestRetrieveErrors(t *testing.T) {
	env := map[string]string{"EP": "jaeger:4317", "BAD": "nohost", "YES": "yes please"}
	p := &provider{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	for uri, want := range map[string]string{
		"grpcinsecure:EP":          "two environment variable names",
		"grpcinsecure:EP:bad-name": "invalid name",
		"grpcinsecure:UNSET:X":     "UNSET is required",
		"grpcinsecure:BAD:X":       "environment variable BAD",
		"grpcinsecure:EP:YES":      `environment variable YES="yes please": want true or false`,
	} {
		_, err := p.Retrieve(t.Context(), uri, nil)
		assert.ErrorContains(t, err, want, uri)
	}
}
