// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package otlpsink

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func twoSpans() ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Spans().AppendEmpty().SetName("a")
	ss.Spans().AppendEmpty().SetName("b")
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func post(t *testing.T, url string) int {
	t.Helper()
	body, err := twoSpans().MarshalProto()
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTPKeepsRefusesAndDiscards(t *testing.T) {
	s, err := Start(nil)
	require.NoError(t, err)
	defer s.Close()
	s.SetRespond(func(r Request) (int, http.Header, []byte) {
		if r.Header.Get("Content-Type") != "application/x-protobuf" {
			return http.StatusBadRequest, nil, nil
		}
		return 0, nil, nil
	})
	assert.Equal(t, http.StatusOK, post(t, s.URL+"/v1/traces"))
	assert.Equal(t, http.StatusNotFound, post(t, s.URL+"/v2/traces"))
	assert.Equal(t, 2, s.Count(Traces))

	s.SetRespond(func(Request) (int, http.Header, []byte) { return http.StatusServiceUnavailable, nil, nil })
	assert.Equal(t, http.StatusServiceUnavailable, post(t, s.URL+"/v1/traces"))
	assert.Equal(t, 1, s.Refused())

	s.SetDiscard(true)
	assert.Equal(t, http.StatusOK, post(t, s.URL+"/v1/traces"))
	assert.Equal(t, 1, s.Discarded())
	assert.Len(t, s.Requests(), 1, "discarded requests are not kept")
}

func TestGRPCAnswersAsTheResponderSays(t *testing.T) {
	s, err := StartGRPC()
	require.NoError(t, err)
	defer s.Close()
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-token", "abc")

	partial := ptraceotlp.NewExportResponse()
	partial.PartialSuccess().SetRejectedSpans(1)
	body, err := partial.MarshalProto()
	require.NoError(t, err)
	s.SetRespond(func(Request) (int, http.Header, []byte) { return 0, nil, body })
	resp, err := client.Export(ctx, twoSpans())
	require.NoError(t, err)
	assert.Equal(t, int64(1), resp.PartialSuccess().RejectedSpans())
	require.Len(t, s.Requests(), 1)
	r := s.Requests()[0]
	assert.Equal(t, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.Path)
	assert.Equal(t, "abc", r.Header.Get("x-token"))
	assert.Equal(t, 2, s.Count(Traces))

	for httpStatus, want := range map[int]codes.Code{
		http.StatusServiceUnavailable: codes.Unavailable,
		http.StatusTooManyRequests:    codes.ResourceExhausted,
		http.StatusBadRequest:         codes.InvalidArgument,
	} {
		s.SetRespond(func(Request) (int, http.Header, []byte) { return httpStatus, nil, []byte("no") })
		_, err := client.Export(ctx, twoSpans())
		assert.Equal(t, want, status.Code(err), "HTTP %d", httpStatus)
	}
	assert.Equal(t, 3, s.Refused())
}
