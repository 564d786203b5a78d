// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func benchJob(b *testing.B) job {
	o, err := parseFlags([]string{"-ranks", "8", "-batch", "500"}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	return o.job()
}

// BenchmarkRender is the generator's per-request cost: copy one 500-span
// request and patch it for a new replay.
func BenchmarkRender(b *testing.B) {
	j := benchJob(b)
	templates, err := buildTemplates(j, 0)
	if err != nil {
		b.Fatal(err)
	}
	tpl := templates[0]
	buf := make([]byte, 0, len(tpl.data))
	b.SetBytes(int64(len(tpl.data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		buf = tpl.render(buf, replay{mask: j.hash(11, uint64(i)), shift: int64(i), iteration: int64(i)})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tpl.items), "ns/span")
}

// BenchmarkMarshal is what rendering replaces: marshaling the same 500-span
// request from pdata on every send.
func BenchmarkMarshal(b *testing.B) {
	j := benchJob(b)
	req := ptraceotlp.NewExportRequestFromTraces(j.traces(0, 0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := req.MarshalProto(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*j.itemsPerRequest()), "ns/span")
}
