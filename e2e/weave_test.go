// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestWeavePreset runs configs/weave.yaml against a fake Weave that decodes
// OTLP, checks the API key and that each request carries one project. Ranks
// of two projects arrive, once each, with Weave's dotted-key conflict
// (slurm.job.id and slurm.job.id.raw) renamed; ranks without W&B identity are
// not sent: dead-lettered, and counted.
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
		"otelcol_exporter_weave_dead_letters", "reason=unroutable"); err != nil {
		t.Errorf("spans without a project were not dead-lettered: %v", err)
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

// TestWeavePresetDeadLettersAndReplays holds configs/weave.yaml to the
// network presets' promise: a fake Weave answers 403 for the first 15 s of
// a 25 s job (write access granted late) while one run sends no W&B
// project. Every acknowledged span is at Weave or in its run's dead-letter
// file (refused, unroutable), span id by span id; then configs/replay.yaml,
// pointed at Weave's OTLP endpoint with the key and a project_id header,
// delivers every letter. Before the weave exporter dead-lettered, the
// refused and project-less spans were dropped after the answer.
func TestWeavePresetDeadLettersAndReplays(t *testing.T) {
	const key = "wandb-e2e-key-27182818"
	var refusing atomic.Bool
	refusing.Store(true)
	sink, accepted := takingSink(t, func(r otlpsink.Request) (int, http.Header, []byte) {
		switch {
		case r.Header.Get("wandb-api-key") != key:
			return http.StatusUnauthorized, nil, []byte("bad key")
		case refusing.Load():
			return http.StatusForbidden, nil, []byte(`{"detail":"permission denied"}`)
		}
		return 0, nil, nil
	})
	env := testEnv(t)
	env["WEAVE_ENDPOINT"] = sink.URL + "/v1/traces"
	env["WANDB_API_KEY"] = key
	env["NEMO_RANK_STRATEGY"] = "all_ranks"
	c := testcollector.Start(t, testcollector.Config(t, "weave.yaml"), testcollector.Options{Env: env})
	time.AfterFunc(15*time.Second, func() { refusing.Store(false) })

	acked := lensemu.NewAckLog()
	ranks := deadLetterJob(c, "run-weave", 250, acked) // 25 s
	for i := range ranks {
		ranks[i].Resource = append(ranks[i].Resource, attribute.String("wandb.entity", "nemo-team"), attribute.String("wandb.project", "proj-a"))
	}
	ranks = append(ranks, deadLetterJob(c, "run-no-project", 50, acked)...)
	runJob(t, ranks)
	ids := hexIDs(acked)
	delivered, lettered, dups := waitAccounted(t, deliveryTimeout, ids, accepted.snapshot, env["NEMO_TELEMETRY_DIR"], "weave")
	reasons := countReasons(lettered)
	c.Stop()
	t.Logf("weave refusing (403) for the first 15 s of a 25 s job, one run without a project: %d spans acknowledged, %d delivered, %d dead-lettered %v, %d duplicates",
		len(ids), len(delivered), len(lettered), reasons, dups)
	if reasons["refused"] == 0 || reasons["unroutable"] == 0 || reasons["refused"]+reasons["unroutable"] != len(lettered) {
		t.Fatalf("dead letters %v: want the refused spans as refused and the project-less run's as unroutable", reasons)
	}
	if len(delivered) == 0 {
		t.Fatal("nothing was delivered once Weave took the project")
	}
	if strings.Contains(c.Logs(), key) {
		t.Error("the collector logged the W&B API key")
	}

	renv := otlpBackendEnv(t, sink.URL)
	renv["NEMO_TELEMETRY_DIR"] = env["NEMO_TELEMETRY_DIR"]
	renv["NEMO_REPLAY_FROM"] = "weave"
	renv["OTLP_BACKEND_HEADERS"] = "wandb-api-key=" + key + ",project_id=nemo-team/proj-c"
	replayAll(t, renv, sink, accepted, ids)
}
