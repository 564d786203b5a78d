// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package grpcendpointprovider provides the `grpcendpoint` config scheme:
// `${grpcendpoint:NAME}` (or `${grpcendpoint:NAME:-DEFAULT}`) reads the
// environment variable NAME, an endpoint written for any OTLP protocol
// (host:port, or a URL such as https://otlp.example.com/otlp), and expands to
// the value an otlp_grpc exporter's `endpoint` takes: host:port, with the
// URL's port, else the scheme's (443 for https, 80 for http), and the URL's
// scheme kept in front (configgrpc reads it: https:// always means TLS); a
// path is dropped, gRPC has none. Pair it with ${grpcinsecure:NAME:...} for
// `tls.insecure`, so that http:// means no TLS, as in the OpenTelemetry SDKs.
//
// It lets one preset variable feed both an otlp_grpc and an otlp_http
// exporter, of which the pipelines use one (configs/otlp.yaml): the collector
// validates every exporter a config defines, used or not, and otlp_grpc
// refuses an endpoint without a port or with a path. Like ${required:NAME},
// the start fails naming NAME when it is unset or empty and has no default.
package grpcendpointprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/grpcendpointprovider"

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/envvarname"
	"github.com/nemo-lens/otelcol-nemo/internal/grpcendpoint"
)

const schemeName = "grpcendpoint"

type provider struct {
	lookup func(string) (string, bool)
}

// NewFactory returns a factory for the `grpcendpoint` scheme.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
		return &provider{lookup: os.LookupEnv}
	})
}

func (p *provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	name, val, err := envvarname.WithDefault(uri, schemeName, p.lookup)
	if err != nil {
		return nil, err
	}
	e, err := grpcendpoint.Parse(val)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", name, err)
	}
	return confmap.NewRetrieved(e.Target())
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
