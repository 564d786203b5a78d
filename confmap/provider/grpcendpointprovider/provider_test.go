package grpcendpointprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"jaeger:4317":                     "jaeger:4317",
		"127.0.0.1:4317":                  "127.0.0.1:4317",
		"https://otlp.example.com":        "otlp.example.com:443",
		"https://otlp.example.com/otlp/":  "otlp.example.com:443",
		"http://tempo:4317":               "tempo:4317",
		"http://[::1]":                    "[::1]:80",
		"https://api.honeycomb.io:443/v1": "api.honeycomb.io:443",
	} {
		got, err := HostPort(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"jaeger", "ftp://x", "https://"} {
		_, err := HostPort(bad)
		assert.Error(t, err, bad)
	}
}

func TestRetrieve(t *testing.T) {
	env := map[string]string{"EP": "https://otlp.example.com/otlp", "BAD": "nohost"}
	p := &provider{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	r, err := p.Retrieve(t.Context(), "grpcendpoint:EP", nil)
	require.NoError(t, err)
	v, err := r.AsRaw()
	require.NoError(t, err)
	assert.Equal(t, "otlp.example.com:443", v)

	_, err = p.Retrieve(t.Context(), "grpcendpoint:UNSET", nil)
	require.ErrorContains(t, err, "UNSET is required")
	_, err = p.Retrieve(t.Context(), "grpcendpoint:BAD", nil)
	require.ErrorContains(t, err, "environment variable BAD")
}
