// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package otlpsink // import "github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"

import (
	"context"
	"net"
	"net/http"

	// The gRPC compressors a collector sends with (snappy, zstd; gzip is
	// grpc-go's own), registered by configgrpc: the agent preset sends snappy.
	_ "go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// StartGRPC listens for OTLP/gRPC (the trace, metrics and logs services) on
// a free 127.0.0.1 port, given in Addr; URL is empty. Each request goes to
// the responder like an OTLP/HTTP one, with its metadata as Header. opts
// are the server's (grpc.Creds for TLS).
func StartGRPC(opts ...grpc.ServerOption) (*Sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{Addr: l.Addr().String(), signalOf: StandardPaths}
	srv := grpc.NewServer(opts...)
	ptraceotlp.RegisterGRPCServer(srv, &grpcTraces{s: s})
	pmetricotlp.RegisterGRPCServer(srv, &grpcMetrics{s: s})
	plogotlp.RegisterGRPCServer(srv, &grpcLogs{s: s})
	s.stop = srv.Stop
	go func() { _ = srv.Serve(l) }()
	return s, nil
}

type grpcTraces struct {
	ptraceotlp.UnimplementedGRPCServer
	s *Sink
}

func (g *grpcTraces) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	return export(ctx, g.s, Request{Signal: Traces, Traces: req.Traces()}, ptraceotlp.NewExportResponse())
}

type grpcMetrics struct {
	pmetricotlp.UnimplementedGRPCServer
	s *Sink
}

func (g *grpcMetrics) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	return export(ctx, g.s, Request{Signal: Metrics, Metrics: req.Metrics()}, pmetricotlp.NewExportResponse())
}

type grpcLogs struct {
	plogotlp.UnimplementedGRPCServer
	s *Sink
}

func (g *grpcLogs) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	return export(ctx, g.s, Request{Signal: Logs, Logs: req.Logs()}, plogotlp.NewExportResponse())
}

// export answers one gRPC export: resp, filled from the responder's body
// when it gave one, or the error its status stands for.
func export[R interface{ UnmarshalProto([]byte) error }](ctx context.Context, s *Sink, r Request, resp R) (R, error) {
	body, err := s.answerGRPC(ctx, r)
	if err == nil && body != nil {
		err = resp.UnmarshalProto(body)
	}
	return resp, err
}

// answerGRPC completes r with the call's method and metadata, asks the
// responder, and returns the response body or the gRPC error its status
// stands for.
func (s *Sink) answerGRPC(ctx context.Context, r Request) ([]byte, error) {
	r.Path, _ = grpc.Method(ctx)
	r.Header = http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	code, _, body := s.answer(r)
	if code == http.StatusOK {
		return body, nil
	}
	msg := string(body)
	if msg == "" {
		msg = http.StatusText(code)
	}
	return nil, status.Error(grpcCode(code), msg)
}

// grpcCode is the gRPC code that an OTLP/gRPC server answers where an
// OTLP/HTTP server answers the HTTP status (retryable stays retryable).
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	default:
		return codes.Internal
	}
}
