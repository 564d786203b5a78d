// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package grpcinsecureprovider provides the `grpcinsecure` config scheme:
// `${grpcinsecure:ENDPOINT:INSECURE}` expands to the `tls.insecure` an
// otlp_grpc exporter needs for the endpoint in the environment variable
// ENDPOINT, by the OpenTelemetry SDKs' rule: true for an http:// URL, false
// for an https:// URL, and for a host:port the boolean in the variable
// INSECURE (false when unset or empty), as OTEL_EXPORTER_OTLP_INSECURE
// applies only to an endpoint without a scheme.
//
// Without it, `OTLP_BACKEND_ENDPOINT=http://host:4317` kept TLS on (the
// scheme was dropped) and every export failed with "tls: first record does
// not look like a TLS handshake". Use it next to ${grpcendpoint:ENDPOINT}:
//
//	otlp_grpc:
//	  endpoint: ${grpcendpoint:OTLP_BACKEND_ENDPOINT}
//	  tls:
//	    insecure: ${grpcinsecure:OTLP_BACKEND_ENDPOINT:OTLP_BACKEND_INSECURE}
package grpcinsecureprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/grpcinsecureprovider"

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/envvarname"
	"github.com/nemo-lens/otelcol-nemo/internal/grpcendpoint"
)

const schemeName = "grpcinsecure"

type provider struct {
	lookup func(string) (string, bool)
}

// NewFactory returns a factory for the `grpcinsecure` scheme.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
		return &provider{lookup: os.LookupEnv}
	})
}

func (p *provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	endpointName, insecureName, err := envvarname.Pair(uri, schemeName)
	if err != nil {
		return nil, err
	}
	_, val, err := envvarname.Required(schemeName+":"+endpointName, schemeName, p.lookup)
	if err != nil {
		return nil, err
	}
	e, err := grpcendpoint.Parse(val)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", endpointName, err)
	}
	bare := false
	if s, _ := p.lookup(insecureName); s != "" {
		if bare, err = strconv.ParseBool(s); err != nil {
			return nil, fmt.Errorf("environment variable %s=%q: want true or false", insecureName, s)
		}
	}
	return confmap.NewRetrieved(e.Insecure(bare))
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
