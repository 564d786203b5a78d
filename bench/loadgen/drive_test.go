// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
)

// traceSink is an OTLP/gRPC backend that decodes every request, refuses
// every fifth with Unavailable and rejects one span of every third as a
// partial success; accepted counts the spans it did not reject.
type traceSink struct {
	*otlpsink.Sink
	accepted atomic.Int64
}

func startTraceSink(t *testing.T) (*traceSink, string) {
	t.Helper()
	s, err := otlpsink.StartGRPC()
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	sink := &traceSink{Sink: s}
	var calls atomic.Int64
	s.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		n := calls.Add(1)
		if n%5 == 0 {
			return http.StatusServiceUnavailable, nil, []byte("busy")
		}
		spans := int64(r.Items())
		if n%3 != 0 {
			sink.accepted.Add(spans)
			return 0, nil, nil
		}
		resp := ptraceotlp.NewExportResponse()
		resp.PartialSuccess().SetRejectedSpans(1)
		body, err := resp.MarshalProto()
		if err != nil {
			return http.StatusInternalServerError, nil, []byte(err.Error())
		}
		sink.accepted.Add(spans - 1)
		return 0, nil, body
	})
	return sink, s.Addr
}

// calls is the number of requests the sink answered, kept or refused.
func (s *traceSink) calls() int64 { return int64(len(s.Requests()) + s.Refused()) }

// dupes counts the span ids the kept requests carry more than once.
func (s *traceSink) dupes() int {
	ids := map[pcommon.SpanID]bool{}
	n := 0
	for _, r := range s.Requests() {
		for _, sp := range spansOf(r.Traces) {
			if ids[sp.SpanID()] {
				n++
			}
			ids[sp.SpanID()] = true
		}
	}
	return n
}

// sawHeader says whether a kept request carried the header key: value.
func (s *traceSink) sawHeader(key, value string) bool {
	for _, r := range s.Requests() {
		if slices.Contains(r.Header.Values(key), value) {
			return true
		}
	}
	return false
}

func TestDriveGRPC(t *testing.T) {
	sink, addr := startTraceSink(t)
	o, err := parseFlags([]string{
		"-endpoint", addr, "-ranks", "4", "-batch", "100", "-count", "6000",
		"-conns", "2", "-workers", "3", "-duration", "1m", "-error-backoff", "0", "-header", "x-token=abc",
	}, io.Discard)
	require.NoError(t, err)
	rep, err := run(t.Context(), o)
	require.NoError(t, err)

	assert.Equal(t, int64(60), rep.RequestsSent, "-count 6000 at 100 spans per request")
	assert.Equal(t, sink.calls(), rep.RequestsSent)
	assert.Equal(t, int64(12), rep.RequestsRefused)
	assert.Equal(t, map[string]int64{"grpc Unavailable": 12, "partial success": 16}, rep.Errors)
	assert.Equal(t, sink.accepted.Load(), rep.ItemsAccepted, "accepted count matches what the server kept")
	assert.Equal(t, int64(16), rep.ItemsRejected)
	assert.Equal(t, int64(1200), rep.ItemsRefused)
	assert.Equal(t, 0, sink.dupes(), "no span id is sent twice")
	assert.True(t, sink.sawHeader("x-token", "abc"), "-header reaches the server")
	assert.Positive(t, rep.ItemsPerSecond)
	assert.Positive(t, rep.LatencyMs["max"])
}

func TestDriveHTTP(t *testing.T) {
	sink, err := otlpsink.Start(func(path string) string {
		if path == "/v1/traces" {
			return otlpsink.Traces
		}
		return "" // answered 404: neither kept nor refused, so badType below
	})
	require.NoError(t, err)
	defer sink.Close()
	var calls atomic.Int64
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		if calls.Add(1)%4 == 0 {
			return http.StatusServiceUnavailable, nil, nil
		}
		return 0, nil, nil
	})

	o, err := parseFlags([]string{
		"-protocol", "http", "-endpoint", strings.TrimPrefix(sink.URL, "http://"),
		"-batch", "20", "-count", "400", "-conns", "3", "-error-backoff", "0",
	}, io.Discard)
	require.NoError(t, err)
	rep, err := run(t.Context(), o)
	require.NoError(t, err)
	kept := sink.Requests()
	badType := int64(len(kept)+sink.Refused()) != rep.RequestsSent
	for _, r := range kept {
		badType = badType || r.Header.Get("Content-Type") != "application/x-protobuf"
	}
	assert.False(t, badType, "requests go to /v1/traces as application/x-protobuf")
	assert.Equal(t, int64(20), rep.RequestsSent)
	assert.Equal(t, int64(5), rep.RequestsRefused)
	assert.Equal(t, map[string]int64{"http 503": 5}, rep.Errors)
	assert.Equal(t, int64(sink.Count(otlpsink.Traces)), rep.ItemsAccepted)
	assert.Equal(t, 3, rep.Workers, "http: one request in flight per connection")
}

func TestDriveNoCollector(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	o, err := parseFlags([]string{"-endpoint", addr, "-duration", "300ms", "-timeout", "100ms", "-conns", "1", "-workers", "1"}, io.Discard)
	require.NoError(t, err)
	rep, err := run(t.Context(), o)
	require.NoError(t, err)
	assert.Zero(t, rep.ItemsAccepted)
	assert.Positive(t, rep.RequestsRefused)
	assert.Equal(t, rep.RequestsSent, rep.Errors["grpc Unavailable"])
}

func TestDriveStopsWithContext(t *testing.T) {
	_, addr := startTraceSink(t)
	o, err := parseFlags([]string{"-endpoint", addr, "-duration", "1h", "-rate", "10"}, io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan report)
	go func() {
		rep, _ := run(ctx, o)
		done <- rep
	}()
	cancel()
	select {
	case rep := <-done:
		assert.LessOrEqual(t, rep.RequestsSent, int64(1))
	case <-time.After(time.Minute):
		t.Fatal("run did not stop when its context ended")
	}
}

func TestFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-protocol", "udp"}, "-protocol must be grpc or http"},
		{[]string{"-signal", "profiles"}, "-signal must be traces, metrics or logs"},
		{[]string{"-ranks", "3"}, "-ranks must be a positive multiple of tp*pp (2), got 3"},
		{[]string{"-duration", "2h"}, "-duration must be in (0,1h0m0s]"},
		{[]string{"-duration", "0s"}, "-duration must be in"},
		{[]string{"-rate", "-1"}, "-rate must be >= 0"},
		{[]string{"-trace-scope", "job"}, "-trace-scope must be"},
		{[]string{"-rank-keys", "x"}, "-rank-keys must be"},
		{[]string{"-header", "novalue"}, "header must be key=value"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
	o, err := parseFlags([]string{"-protocol", "http"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:4318", o.endpoint)
}

func TestLatencyHist(t *testing.T) {
	var h latencyHist
	for _, d := range []time.Duration{0, time.Microsecond, 5 * time.Microsecond, 999 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second} {
		i := latencyBucket(d)
		up := latencyUpper(i)
		assert.GreaterOrEqual(t, up, d, "bucket upper bound of %s", d)
		assert.LessOrEqual(t, float64(up), float64(d)*1.125+float64(time.Microsecond), "resolution at %s", d)
		if i > 0 {
			assert.Less(t, latencyUpper(i-1), d, "previous bucket ends below %s", d)
		}
	}
	for i := range 100 {
		h.record(time.Duration(i+1) * time.Millisecond)
	}
	q := h.quantiles(0.5, 1)
	assert.InDelta(t, 50, q[0].Seconds()*1000, 50*0.125)
	assert.InDelta(t, 100, q[1].Seconds()*1000, 100*0.125)
}

func TestScheduleTokenBucket(t *testing.T) {
	start := time.Now()
	s := &schedule{limit: 100, deadline: start.Add(time.Hour), interval: 10 * time.Millisecond, burst: 50 * time.Millisecond, next: start}
	for k := range 5 {
		n, at, ok := s.take()
		require.True(t, ok)
		assert.Equal(t, int64(k), n)
		assert.Equal(t, start.Add(time.Duration(k)*10*time.Millisecond), at, "one request per interval")
	}
	// After a stall the bucket holds at most burst worth of requests.
	s.next = start.Add(-time.Minute)
	before := time.Now()
	_, at, ok := s.take()
	require.True(t, ok)
	assert.False(t, at.Before(before.Add(-50*time.Millisecond)), "catch-up is bounded by the burst")

	s.sent = s.limit
	_, _, ok = s.take()
	assert.False(t, ok, "stops at the count")
	deadline := time.Now().Add(time.Hour)
	s = &schedule{limit: 100, deadline: deadline, interval: 10 * time.Millisecond, burst: 2 * time.Hour, next: deadline.Add(-25 * time.Millisecond)}
	var got int
	for {
		if _, _, ok := s.take(); !ok {
			break
		}
		got++
	}
	assert.Equal(t, 3, got, "no request is scheduled at or after the deadline")
}
