// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package requiredenvprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func newProvider(env map[string]string) confmap.Provider {
	return &provider{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
}

func TestValidateProviderScheme(t *testing.T) {
	assert.NoError(t, confmaptest.ValidateProviderScheme(NewFactory().Create(confmap.ProviderSettings{})))
}

func TestRetrieve(t *testing.T) {
	p := newProvider(map[string]string{"WANDB_API_KEY": "secret-123", "EMPTY": ""})

	ret, err := p.Retrieve(t.Context(), "required:WANDB_API_KEY", nil)
	require.NoError(t, err)
	raw, err := ret.AsRaw()
	require.NoError(t, err)
	assert.Equal(t, "secret-123", raw)

	for _, name := range []string{"MISSING", "EMPTY"} {
		_, err = p.Retrieve(t.Context(), "required:"+name, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "environment variable "+name+" is required")
	}

	_, err = p.Retrieve(t.Context(), "required:1BAD", nil)
	assert.ErrorContains(t, err, "invalid name")
	_, err = p.Retrieve(t.Context(), "env:WANDB_API_KEY", nil)
	assert.ErrorContains(t, err, "not supported")
}

// A value is never echoed in an error: only the variable's name is.
func TestErrorsDoNotLeakValues(t *testing.T) {
	p := newProvider(map[string]string{"K": "top-secret"})
	_, err := p.Retrieve(t.Context(), "required:k", nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "top-secret")
}
