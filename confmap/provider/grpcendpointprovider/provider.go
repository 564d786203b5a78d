// Package grpcendpointprovider provides the `grpcendpoint` config scheme:
// `${grpcendpoint:NAME}` reads the environment variable NAME, an endpoint
// written for any OTLP protocol (host:port, or a URL such as
// https://otlp.example.com/otlp), and expands to the host:port a gRPC
// client dials: the URL's port, else the scheme's (443 for https, 80 for
// http); a path is dropped, gRPC has none.
//
// It lets one preset variable feed both an otlp_grpc and an otlp_http
// exporter, of which the pipelines use one (configs/otlp.yaml): the collector
// validates every exporter a config defines, used or not, and otlp_grpc
// refuses an endpoint without a port or with a path. Like ${required:NAME},
// the start fails naming NAME when it is unset or empty.
package grpcendpointprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/grpcendpointprovider"

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/envvarname"
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
	name, val, err := envvarname.Required(uri, schemeName, p.lookup)
	if err != nil {
		return nil, err
	}
	hostPort, err := HostPort(val)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", name, err)
	}
	return confmap.NewRetrieved(hostPort)
}

// HostPort turns "host:port" or an http(s) URL into host:port.
func HostPort(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		if _, _, err := net.SplitHostPort(endpoint); err != nil {
			return "", fmt.Errorf("%q is neither host:port nor a URL (e.g. collector.example.com:4317 or https://otlp.example.com): %w", endpoint, err)
		}
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%q is not a URL with a host (e.g. https://otlp.example.com)", endpoint)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return "", fmt.Errorf("%q has no port and its scheme %q has no default one: add :port", endpoint, u.Scheme)
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
