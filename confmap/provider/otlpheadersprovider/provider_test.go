// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package otlpheadersprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestValidateProviderScheme(t *testing.T) {
	assert.NoError(t, confmaptest.ValidateProviderScheme(NewFactory().Create(confmap.ProviderSettings{})))
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]any
		wantErr string
	}{
		{"", map[string]any{}, ""},
		{"  ", map[string]any{}, ""},
		{"api-key=abc", map[string]any{"api-key": "abc"}, ""},
		{"Authorization=Basic%20dXNlcjpwYXNz, x-scope-orgid = 42 ", map[string]any{"Authorization": "Basic dXNlcjpwYXNz", "x-scope-orgid": "42"}, ""},
		{"a=b=c", map[string]any{"a": "b=c"}, ""},
		{"a=1,,b=2", map[string]any{"a": "1", "b": "2"}, ""},
		{"novalue", nil, "header 1 has no '='"},
		{"=v", nil, "header 1 has an empty"},
		{"k=%zz", nil, `header "k" has a badly URL-encoded value`},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestRetrieve(t *testing.T) {
	p := &provider{lookup: func(k string) (string, bool) {
		v, ok := map[string]string{"H": "dd-api-key=secret"}[k]
		return v, ok
	}}
	ret, err := p.Retrieve(t.Context(), "otlpheaders:H", nil)
	require.NoError(t, err)
	raw, err := ret.AsRaw()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"dd-api-key": "secret"}, raw)

	ret, err = p.Retrieve(t.Context(), "otlpheaders:UNSET", nil)
	require.NoError(t, err)
	raw, err = ret.AsRaw()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, raw)

	_, err = (&provider{lookup: func(string) (string, bool) { return "k=%zz", true }}).Retrieve(t.Context(), "otlpheaders:H", nil)
	assert.ErrorContains(t, err, "environment variable H")
}
