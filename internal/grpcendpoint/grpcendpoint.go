// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package grpcendpoint reads an OTLP/gRPC endpoint the way the OpenTelemetry
// SDKs read OTEL_EXPORTER_OTLP_ENDPOINT: host:port, or an http(s) URL whose
// scheme says whether the connection uses TLS (http:// no, https:// yes). A
// host:port says nothing about TLS: the exporter's own insecure setting
// decides, as OTEL_EXPORTER_OTLP_INSECURE does for the SDKs.
//
// The config sources ${grpcendpoint:NAME} and ${grpcinsecure:NAME:INSECURE}
// read preset variables with it.
package grpcendpoint // import "github.com/nemo-lens/otelcol-nemo/internal/grpcendpoint"

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Endpoint is a parsed OTLP/gRPC endpoint.
type Endpoint struct {
	// Scheme is "http", "https", or "" for a bare host:port.
	Scheme string
	// HostPort is what the client dials: the URL's port, else the
	// scheme's (443 for https, 80 for http). A URL's path is dropped:
	// gRPC has none.
	HostPort string
}

// Parse reads "host:port" or an http(s) URL.
func Parse(endpoint string) (Endpoint, error) {
	if !strings.Contains(endpoint, "://") {
		if _, _, err := net.SplitHostPort(endpoint); err != nil {
			return Endpoint{}, fmt.Errorf("%q is neither host:port nor a URL (e.g. collector.example.com:4317, http://jaeger:4317 or https://otlp.example.com): %w", endpoint, err)
		}
		return Endpoint{HostPort: endpoint}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return Endpoint{}, fmt.Errorf("%q is not a URL with a host (e.g. https://otlp.example.com)", endpoint)
	}
	var defaultPort string
	switch u.Scheme {
	case "https":
		defaultPort = "443"
	case "http":
		defaultPort = "80"
	default:
		return Endpoint{}, fmt.Errorf("%q has the scheme %q: write http:// (no TLS), https:// (TLS) or host:port", endpoint, u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	return Endpoint{Scheme: u.Scheme, HostPort: net.JoinHostPort(u.Hostname(), port)}, nil
}

// Target is the value for an otlp_grpc exporter's `endpoint`: host:port,
// with the URL's scheme kept in front, because configgrpc reads it: it
// dials host:port and, for https://, uses TLS even where tls.insecure is
// true.
func (e Endpoint) Target() string {
	if e.Scheme == "" {
		return e.HostPort
	}
	return e.Scheme + "://" + e.HostPort
}

// Insecure is the exporter's tls.insecure: true for http://, false for
// https://, and bareInsecure for a host:port.
func (e Endpoint) Insecure(bareInsecure bool) bool {
	switch e.Scheme {
	case "http":
		return true
	case "https":
		return false
	default:
		return bareInsecure
	}
}
