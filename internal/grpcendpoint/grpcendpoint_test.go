// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package grpcendpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Endpoint{
		"jaeger:4317":                     {HostPort: "jaeger:4317"},
		"127.0.0.1:4317":                  {HostPort: "127.0.0.1:4317"},
		"https://otlp.example.com":        {Scheme: "https", HostPort: "otlp.example.com:443"},
		"https://otlp.example.com/otlp/":  {Scheme: "https", HostPort: "otlp.example.com:443"},
		"http://tempo:4317":               {Scheme: "http", HostPort: "tempo:4317"},
		"http://[::1]":                    {Scheme: "http", HostPort: "[::1]:80"},
		"https://api.honeycomb.io:443/v1": {Scheme: "https", HostPort: "api.honeycomb.io:443"},
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"jaeger", "ftp://x:21", "dns:///gw:4317", "https://", ""} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"jaeger:4317":              "jaeger:4317",
		"http://tempo:4317/":       "http://tempo:4317",
		"https://otlp.example.com": "https://otlp.example.com:443",
	} {
		e, err := Parse(in)
		require.NoError(t, err)
		assert.Equal(t, want, e.Target(), in)
	}
}

// The SDKs' rule: the scheme decides; the insecure setting only applies
// to a host:port.
func TestInsecure(t *testing.T) {
	for _, tt := range []struct {
		endpoint string
		bare     bool
		want     bool
	}{
		{"http://jaeger:4317", false, true},
		{"http://jaeger:4317", true, true},
		{"https://otlp.example.com", true, false},
		{"https://otlp.example.com", false, false},
		{"jaeger:4317", false, false},
		{"jaeger:4317", true, true},
	} {
		e, err := Parse(tt.endpoint)
		require.NoError(t, err)
		assert.Equal(t, tt.want, e.Insecure(tt.bare), "%s with %v", tt.endpoint, tt.bare)
	}
}
