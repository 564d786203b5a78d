// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package grpcendpointprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetrieve(t *testing.T) {
	env := map[string]string{"EP": "https://otlp.example.com/otlp", "PLAIN": "http://jaeger:4317", "BARE": "jaeger:4317", "BAD": "nohost", "EMPTY": ""}
	p := &provider{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	for uri, want := range map[string]string{
		"grpcendpoint:EP":                      "https://otlp.example.com:443",
		"grpcendpoint:PLAIN":                   "http://jaeger:4317",
		"grpcendpoint:BARE":                    "jaeger:4317",
		"grpcendpoint:BARE:-localhost:14317":   "jaeger:4317",
		"grpcendpoint:UNSET:-localhost:14317":  "localhost:14317",
		"grpcendpoint:EMPTY:-http://jaeger:80": "http://jaeger:80",
	} {
		r, err := p.Retrieve(t.Context(), uri, nil)
		require.NoError(t, err, uri)
		v, err := r.AsRaw()
		require.NoError(t, err)
		assert.Equal(t, want, v, uri)
	}

	_, err := p.Retrieve(t.Context(), "grpcendpoint:UNSET", nil)
	require.ErrorContains(t, err, "UNSET is required")
	_, err = p.Retrieve(t.Context(), "grpcendpoint:BAD", nil)
	require.ErrorContains(t, err, "environment variable BAD")
	_, err = p.Retrieve(t.Context(), "grpcendpoint:UNSET:-nohost", nil)
	require.ErrorContains(t, err, "environment variable UNSET")
	_, err = p.Retrieve(t.Context(), "grpcendpoint:BAD-NAME", nil)
	require.ErrorContains(t, err, "invalid name")
}
