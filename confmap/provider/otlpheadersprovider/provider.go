// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package otlpheadersprovider provides the `otlpheaders` config scheme:
// `${otlpheaders:NAME}` reads the environment variable NAME in the format of
// the OpenTelemetry SDK's OTEL_EXPORTER_OTLP_HEADERS
// (`key1=value1,key2=value2`, values URL-encoded) and expands to a map, so a
// collector can reuse the very variable a training job already sets for its
// SDK. An unset or empty variable expands to an empty map.
package otlpheadersprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/otlpheadersprovider"

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/envvarname"
)

const schemeName = "otlpheaders"

type provider struct {
	lookup func(string) (string, bool)
}

// NewFactory returns a factory for the `otlpheaders` scheme.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
		return &provider{lookup: os.LookupEnv}
	})
}

func (p *provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	name, err := envvarname.FromURI(uri, schemeName)
	if err != nil {
		return nil, err
	}
	val, _ := p.lookup(name)
	headers, err := Parse(val)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", name, err)
	}
	return confmap.NewRetrieved(headers)
}

// Parse reads the OTEL_EXPORTER_OTLP_HEADERS format: comma-separated
// key=value pairs, keys and values URL-decoded and trimmed. Errors name the
// offending pair's position, never its value (values are usually secrets).
func Parse(s string) (map[string]any, error) {
	headers := map[string]any{}
	if strings.TrimSpace(s) == "" {
		return headers, nil
	}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("header %d has no '=': the format is key1=value1,key2=value2", i+1)
		}
		key, err := url.PathUnescape(strings.TrimSpace(k))
		if err != nil || key == "" {
			return nil, fmt.Errorf("header %d has an empty or badly encoded key", i+1)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %q has a badly URL-encoded value", key)
		}
		headers[key] = value
	}
	return headers, nil
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
