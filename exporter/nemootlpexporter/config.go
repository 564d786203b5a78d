// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// The protocols, named as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	protocolGRPC         = "grpc"
	protocolHTTPProtobuf = "http/protobuf"
	protocolHTTPJSON     = "http/json"
)

// Config of the nemo_otlp exporter.
type Config struct {
	// Protocol picks the client: grpc, http/protobuf or http/json.
	Protocol string `mapstructure:"protocol"`
	// GRPC is the client of protocol grpc (configgrpc: endpoint host:port,
	// tls, headers, compression, ...).
	GRPC configgrpc.ClientConfig `mapstructure:"grpc"`
	// HTTP is the client of the http/* protocols.
	HTTP HTTPConfig `mapstructure:"http"`
	// TimeoutConfig bounds each attempt.
	TimeoutConfig exporterhelper.TimeoutConfig `mapstructure:",squash"`
	// QueueConfig is exporterhelper's sending_queue; with a storage it is
	// persistent, and an item leaves it only delivered or dead-lettered.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig backs off between attempts; its max_elapsed_time is the
	// retry window: a request still failing past it is dead-lettered (0:
	// retry until the backend takes it).
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// DeadLetter says where what the backend refuses is kept.
	DeadLetter deadletter.Config `mapstructure:"dead_letter"`
}

// HTTPConfig is confighttp's client with the OTLP/HTTP rules of the SDKs:
// endpoint is a base URL to which /v1/<signal> is appended, and a
// per-signal URL, when set, is used verbatim.
//
// ClientConfig is a named field, as in the stock otlp_http exporter: an
// embedded confighttp.ClientConfig would lend HTTPConfig its Unmarshal, which
// decodes its own keys only and drops the per-signal URLs.
type HTTPConfig struct {
	ClientConfig    confighttp.ClientConfig `mapstructure:",squash"`
	TracesEndpoint  string                  `mapstructure:"traces_endpoint"`
	MetricsEndpoint string                  `mapstructure:"metrics_endpoint"`
	LogsEndpoint    string                  `mapstructure:"logs_endpoint"`
}

// Validate checks the settings of the chosen protocol; sending_queue,
// retry_on_failure and dead_letter validate themselves.
func (c *Config) Validate() error {
	var errs []error
	switch c.Protocol {
	case protocolGRPC:
		if c.GRPC.Endpoint == "" {
			errs = append(errs, errors.New("grpc::endpoint is required with protocol grpc: host:port of the backend's OTLP/gRPC receiver"))
		}
	case protocolHTTPProtobuf, protocolHTTPJSON:
		if c.HTTP.ClientConfig.Endpoint == "" && (c.HTTP.TracesEndpoint == "" || c.HTTP.MetricsEndpoint == "" || c.HTTP.LogsEndpoint == "") {
			errs = append(errs, fmt.Errorf("http::endpoint is required with protocol %s (a base URL such as https://otlp.example.com), unless traces_endpoint, metrics_endpoint and logs_endpoint are all set", c.Protocol))
		}
	default:
		errs = append(errs, fmt.Errorf("protocol: %q is not one of grpc, http/protobuf, http/json (as OTEL_EXPORTER_OTLP_PROTOCOL)", c.Protocol))
	}
	return errors.Join(errs...)
}
