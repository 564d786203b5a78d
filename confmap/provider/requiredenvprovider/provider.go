// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package requiredenvprovider provides the `required` config scheme:
// `${required:NAME}` expands to the environment variable NAME, like
// `${env:NAME}`, but fails the collector's start (and `otelcol-nemo validate`)
// with a message naming the variable when it is unset or empty. Presets use it
// for values without which the destination cannot work, such as API keys.
package requiredenvprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/requiredenvprovider"

import (
	"context"
	"os"

	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/envvarname"
)

const schemeName = "required"

type provider struct {
	lookup func(string) (string, bool)
}

// NewFactory returns a factory for the `required` scheme.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
		return &provider{lookup: os.LookupEnv}
	})
}

func (p *provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	_, val, err := envvarname.Required(uri, schemeName, p.lookup)
	if err != nil {
		return nil, err
	}
	return confmap.NewRetrievedFromYAML([]byte(val))
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
