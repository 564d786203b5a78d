// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spantest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestSpansYieldsEverySpanWithItsResource(t *testing.T) {
	td := ptrace.NewTraces()
	for r, names := range [][]string{{"a", "b"}, {}, {"c", "d"}} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("r", int64(r))
		rs.ScopeSpans().AppendEmpty() // an empty scope
		ss := rs.ScopeSpans().AppendEmpty()
		for _, n := range names {
			ss.Spans().AppendEmpty().SetName(n)
		}
	}
	var got []string
	for res, s := range All(td) {
		r, _ := res.Attributes().Get("r")
		got = append(got, fmt.Sprintf("%d/%s", r.Int(), s.Name()))
		if s.Name() == "c" {
			break
		}
	}
	assert.Equal(t, []string{"0/a", "0/b", "2/c"}, got, "in order, stopping when told")
}
