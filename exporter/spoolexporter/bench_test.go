// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkSpoolTraces: requests of 500 spans of one run, 16 at once (as
// ranks' exports), each decoded from protobuf as the receiver does, taken
// by the spool (fsynced) and delivered to a real OTLP/gRPC receiver. For
// profiles of the spool's own path (-cpuprofile): the receiver shares the
// process.
func BenchmarkSpoolTraces(b *testing.B) {
	gw := startGateway(b)
	exp := startSpool(b, testConfig(b, gw.Addr))
	b.Cleanup(func() { _ = exp.Shutdown(context.WithoutCancel(b.Context())) })

	td := runTraces("run-bench", 500)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		s := spans.At(i)
		s.Attributes().PutStr("nemo.phase", "forward")
		s.Attributes().PutInt("nemo.iteration", int64(i))
		s.SetStartTimestamp(1)
		s.SetEndTimestamp(2)
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(b, err)

	b.SetParallelism(8) // 16 on 2 cores
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
			if err == nil {
				err = exp.ConsumeTraces(b.Context(), req)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	want := b.N * 500
	for deadline := time.Now().Add(time.Minute); spansOf(gw) < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d spans", spansOf(gw), want)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/request")
}
