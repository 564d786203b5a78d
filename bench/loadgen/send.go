// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// outcome is the collector's answer to one request.
type outcome struct {
	// code is "" when the request was accepted, else what refused it
	// ("grpc Unavailable", "http 503", "connection error", ...).
	code string
	// rejected is the partial_success.rejected_* count of an accepted request.
	rejected int64
}

// sender sends pre-marshaled OTLP export requests over one connection.
type sender interface {
	send(ctx context.Context, body []byte) outcome
	close() error
}

// rejectedItems parses an OTLP export response and returns its partial-success
// rejected count (0 for an empty response).
func rejectedItems(signal string, resp []byte) (int64, error) {
	if len(resp) == 0 {
		return 0, nil
	}
	switch signal {
	case signalMetrics:
		r := pmetricotlp.NewExportResponse()
		err := r.UnmarshalProto(resp)
		return r.PartialSuccess().RejectedDataPoints(), err
	case signalLogs:
		r := plogotlp.NewExportResponse()
		err := r.UnmarshalProto(resp)
		return r.PartialSuccess().RejectedLogRecords(), err
	default:
		r := ptraceotlp.NewExportResponse()
		err := r.UnmarshalProto(resp)
		return r.PartialSuccess().RejectedSpans(), err
	}
}

// rawCodec hands gRPC the request bytes as they are and returns the response
// bytes unparsed. It is named "proto" because the bytes are protobuf: the
// content type on the wire stays application/grpc+proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	*b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

var grpcMethods = map[string]string{
	signalTraces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	signalMetrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
	signalLogs:    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}

type grpcSender struct {
	conn   *grpc.ClientConn
	method string
	signal string
	md     metadata.MD
}

// newGRPCSender opens one gRPC connection (one TCP connection: each
// ClientConn has its own transport).
func newGRPCSender(endpoint, signal string, headers map[string]string) (*grpcSender, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})),
	}
	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", endpoint, err)
	}
	g := &grpcSender{conn: conn, method: grpcMethods[signal], signal: signal}
	if len(headers) > 0 {
		g.md = metadata.New(headers)
	}
	return g, nil
}

func (g *grpcSender) send(ctx context.Context, body []byte) outcome {
	var resp []byte
	if g.md != nil {
		ctx = metadata.NewOutgoingContext(ctx, g.md)
	}
	// gRPC is done with body when Invoke returns (the server has answered), so
	// the caller may reuse it.
	if err := g.conn.Invoke(ctx, g.method, &body, &resp); err != nil {
		return outcome{code: "grpc " + status.Code(err).String()}
	}
	n, err := rejectedItems(g.signal, resp)
	if err != nil {
		return outcome{code: "bad response"}
	}
	return outcome{rejected: n}
}

func (g *grpcSender) close() error { return g.conn.Close() }

type httpSender struct {
	client  *http.Client
	url     string
	signal  string
	headers map[string]string
}

var httpPaths = map[string]string{
	signalTraces:  "/v1/traces",
	signalMetrics: "/v1/metrics",
	signalLogs:    "/v1/logs",
}

// newHTTPSender keeps one keep-alive HTTP/1.1 connection.
func newHTTPSender(endpoint, signal string, headers map[string]string, timeout time.Duration) *httpSender {
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &httpSender{
		client:  &http.Client{Transport: transport},
		url:     "http://" + endpoint + httpPaths[signal],
		signal:  signal,
		headers: headers,
	}
}

func (h *httpSender) send(ctx context.Context, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return outcome{code: "bad request"}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return outcome{code: "timeout"}
		}
		return outcome{code: "connection error"}
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{code: "connection error"}
	}
	if resp.StatusCode != http.StatusOK {
		return outcome{code: fmt.Sprintf("http %d", resp.StatusCode)}
	}
	n, err := rejectedItems(h.signal, respBody)
	if err != nil {
		return outcome{code: "bad response"}
	}
	return outcome{rejected: n}
}

func (h *httpSender) close() error {
	h.client.CloseIdleConnections()
	return nil
}
