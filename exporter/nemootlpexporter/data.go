// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// signal is what nemo_otlp needs of one signal: its letters and
// exporters (deadletter.Exporting), its OTLP request and response
// encodings, its gRPC call and its per-signal URL.
type signal[T any, E component.Component] struct {
	deadletter.Exporting[T, E]
	// request encodes data as an OTLP/HTTP protobuf export request (the
	// JSON one is the letters' encoding, Exporting.JSON).
	request func(d T) ([]byte, error)
	// response decodes an OTLP/HTTP response body (empty: no partial success).
	response func(body []byte, json bool) (deadletter.Partial, error)
	// export makes the gRPC call.
	export   func(ctx context.Context, conn *grpc.ClientConn, d T, opts ...grpc.CallOption) (deadletter.Partial, error)
	endpoint func(*HTTPConfig) string
}

// unmarshaler is an OTLP export response of any signal.
type unmarshaler interface {
	UnmarshalProto([]byte) error
	UnmarshalJSON([]byte) error
}

func decode(resp unmarshaler, body []byte, json bool) error {
	if len(body) == 0 {
		return nil
	}
	if json {
		return resp.UnmarshalJSON(body)
	}
	return resp.UnmarshalProto(body)
}

var traces = signal[ptrace.Traces, exporter.Traces]{
	Exporting: deadletter.TracesExporting,
	request: func(d ptrace.Traces) ([]byte, error) {
		return ptraceotlp.NewExportRequestFromTraces(d).MarshalProto()
	},
	response: func(body []byte, json bool) (deadletter.Partial, error) {
		r := ptraceotlp.NewExportResponse()
		err := decode(&r, body, json)
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedSpans(), Message: r.PartialSuccess().ErrorMessage()}, err
	},
	export: func(ctx context.Context, conn *grpc.ClientConn, d ptrace.Traces, opts ...grpc.CallOption) (deadletter.Partial, error) {
		r, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(d), opts...)
		if err != nil {
			return deadletter.Partial{}, err
		}
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedSpans(), Message: r.PartialSuccess().ErrorMessage()}, nil
	},
	endpoint: func(c *HTTPConfig) string { return c.TracesEndpoint },
}

var metrics = signal[pmetric.Metrics, exporter.Metrics]{
	Exporting: deadletter.MetricsExporting,
	request: func(d pmetric.Metrics) ([]byte, error) {
		return pmetricotlp.NewExportRequestFromMetrics(d).MarshalProto()
	},
	response: func(body []byte, json bool) (deadletter.Partial, error) {
		r := pmetricotlp.NewExportResponse()
		err := decode(&r, body, json)
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedDataPoints(), Message: r.PartialSuccess().ErrorMessage()}, err
	},
	export: func(ctx context.Context, conn *grpc.ClientConn, d pmetric.Metrics, opts ...grpc.CallOption) (deadletter.Partial, error) {
		r, err := pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(d), opts...)
		if err != nil {
			return deadletter.Partial{}, err
		}
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedDataPoints(), Message: r.PartialSuccess().ErrorMessage()}, nil
	},
	endpoint: func(c *HTTPConfig) string { return c.MetricsEndpoint },
}

var logs = signal[plog.Logs, exporter.Logs]{
	Exporting: deadletter.LogsExporting,
	request: func(d plog.Logs) ([]byte, error) {
		return plogotlp.NewExportRequestFromLogs(d).MarshalProto()
	},
	response: func(body []byte, json bool) (deadletter.Partial, error) {
		r := plogotlp.NewExportResponse()
		err := decode(&r, body, json)
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedLogRecords(), Message: r.PartialSuccess().ErrorMessage()}, err
	},
	export: func(ctx context.Context, conn *grpc.ClientConn, d plog.Logs, opts ...grpc.CallOption) (deadletter.Partial, error) {
		r, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(d), opts...)
		if err != nil {
			return deadletter.Partial{}, err
		}
		return deadletter.Partial{Rejected: r.PartialSuccess().RejectedLogRecords(), Message: r.PartialSuccess().ErrorMessage()}, nil
	},
	endpoint: func(c *HTTPConfig) string { return c.LogsEndpoint },
}
