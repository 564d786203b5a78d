// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestWeavePreset runs configs/weave.yaml against a fake Weave that decodes
// OTLP, checks the API key and that each request carries one project. Ranks
// of two projects arrive, once each, with Weave's dotted-key conflict
// (slurm.job.id and slurm.job.id.raw) renamed; ranks without W&B identity are
// not sent, and counted.
func TestWeavePreset(t *testing.T) {
	const key = "wandb-e2e-key-31415926"
	sink, err := otlpsink.Start(func(p string) string {
		if p == "/otel/v1/traces" {
			return otlpsink.Traces
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		if r.Header.Get("wandb-api-key") != key {
			return http.StatusUnauthorized, nil, []byte("bad key")
		}
		return 0, nil, nil
	})

	env := testEnv(t)
	env["WEAVE_ENDPOINT"] = sink.URL + "/otel/v1/traces"
	env["WANDB_API_KEY"] = key
	c := testcollector.Start(t, testcollector.Config(t, "weave.yaml"), testcollector.Options{Env: env})

	withProject := func(ranks []lensemu.Rank, project string, extra ...attribute.KeyValue) []lensemu.Rank {
		for i := range ranks {
			ranks[i].Resource = append(ranks[i].Resource, extra...)
			if project != "" {
				ranks[i].Resource = append(ranks[i].Resource, attribute.String("wandb.entity", "nemo-team"), attribute.String("wandb.project", project))
			}
		}
		return ranks
	}
	var ranks []lensemu.Rank
	ranks = append(ranks, withProject(mixedJob(c, "run-a", 4, 2), "proj-a", attribute.String("slurm.job.id.raw", "4242_0"))...)
	ranks = append(ranks, withProject(mixedJob(c, "run-b", 2, 2), "proj-b")...)
	noProject := withProject(mixedJob(c, "run-c", 2, 2), "")
	sent := runJobByRank(t, append(ranks, noProject...))
	var want, unroutable int64
	for i, res := range sent {
		if i < len(ranks) {
			want += res.Spans
		} else {
			unroutable += res.Spans
		}
	}
	waitFor(t, deliveryTimeout, "every routable span at the fake Weave", func() bool { return int64(sink.Count(otlpsink.Traces)) == want })
	if _, err := c.WaitForMetric(deliveryTimeout, func(v float64) bool { return int64(v) == unroutable },
		"otelcol_exporter_weave_spans_dropped", "reason=missing_project"); err != nil {
		t.Errorf("spans without a project were not counted: %v", err)
	}
	c.Stop()

	projects := map[string]int{}
	for _, r := range sink.Requests() {
		inRequest := map[string]bool{}
		for i := 0; i < r.Traces.ResourceSpans().Len(); i++ {
			attrs := r.Traces.ResourceSpans().At(i).Resource().Attributes()
			entity, _ := attrs.Get("wandb.entity")
			project, _ := attrs.Get("wandb.project")
			inRequest[entity.AsString()+"/"+project.AsString()] = true
			if _, ok := attrs.Get("slurm.job.id"); ok {
				if _, ok := attrs.Get("slurm.job.id.raw"); ok {
					t.Errorf("a resource reached Weave with both slurm.job.id and slurm.job.id.raw")
				}
			}
			projects[entity.AsString()+"/"+project.AsString()] += r.Traces.ResourceSpans().At(i).ScopeSpans().At(0).Spans().Len()
		}
		if len(inRequest) != 1 {
			t.Errorf("a request mixed projects: %v", inRequest)
		}
	}
	if len(projects) != 2 || projects["nemo-team/proj-a"] == 0 || projects["nemo-team/proj-b"] == 0 {
		t.Errorf("spans by project at Weave: %v", projects)
	}
	if distinctSpans(sink) != int(want) {
		t.Errorf("%d distinct spans arrived, %d sent: a span arrived twice", distinctSpans(sink), want)
	}
	if strings.Contains(c.Logs(), key) {
		t.Error("the collector logged the W&B API key")
	}
}
