// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestFanoutPreset runs configs/fanout.yaml with every destination live: a
// real Jaeger v1.76.0 (built by `make jaeger`), a fake Weave that decodes
// OTLP, the Prometheus exporter's endpoint and the JSONL archive. A
// Lens-shaped job (four ranks, half gRPC and half HTTP, one with an error
// step, all with user.email as a resource attribute) and three extra spans
// (two health checks, one checkpoint span with user.email as a span
// attribute) are sent; step sampling keeps every step (its default), so every
// destination must hold exactly the acknowledged spans minus the health
// checks, with cluster.name added and user.email gone.
func TestFanoutPreset(t *testing.T) { testFanout(t, "fanout.yaml", true) }

// TestJaegerPreset runs configs/jaeger.yaml, the fanout without Weave (no
// key needed), the same way: a real Jaeger, the Prometheus endpoint and the
// JSONL archive hold exactly the acknowledged spans minus the health checks.
func TestJaegerPreset(t *testing.T) { testFanout(t, "jaeger.yaml", false) }

func testFanout(t *testing.T, preset string, withWeave bool) {
	const (
		runID       = "fanout-e2e-run"
		worldSize   = 4
		steps       = 3
		errorRank   = 2
		errorIter   = 2
		apiKey      = "wandb-fanout-key-27182818"
		entity      = "nemo-team"
		project     = "fanout-e2e"
		cluster     = "e2e-cluster"
		userEmail   = "alice@example.com"
		redactedKey = "user.email"
	)

	jaeger := startJaeger(t)

	// The fake Weave runs for both presets; jaeger.yaml must send it nothing.
	weave, err := otlpsink.Start(func(p string) string {
		if p == "/otel/v1/traces" {
			return otlpsink.Traces
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	defer weave.Close()
	weave.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		if r.Header.Get("wandb-api-key") != apiKey {
			return http.StatusUnauthorized, nil, []byte("bad key")
		}
		return 0, nil, nil
	})

	promPort := testcollector.FreePort(t)
	env := testEnv(t)
	env["JAEGER_OTLP_ENDPOINT"] = jaeger.OTLPEndpoint
	env["WEAVE_ENDPOINT"] = weave.URL + "/otel/v1/traces"
	env["WANDB_API_KEY"] = apiKey
	env["WANDB_ENTITY"] = entity
	env["WANDB_PROJECT"] = project
	env["PROMETHEUS_EXPORTER_PORT"] = strconv.Itoa(promPort)
	env["CLUSTER_NAME"] = cluster
	env["NEMO_RANK_STRATEGY"] = "all_ranks"
	c := testcollector.Start(t, testcollector.Config(t, preset), testcollector.Options{Env: env})

	// The job: every rank carries user.email as a resource attribute, as
	// OTEL_RESOURCE_ATTRIBUTES in the launch environment would give it.
	ranks := mixedJob(c, runID, worldSize, steps)
	for i := range ranks {
		ranks[i].Resource = append(ranks[i].Resource, attribute.String(redactedKey, userEmail))
	}
	ranks[errorRank].ErrorAtIteration = errorIter
	sent := runJob(t, ranks)
	extra := sendExtraSpans(t, c.GRPCEndpoint(), ranks[0].ResourceAttributes(), userEmail)
	sent.Spans += int64(len(extra))
	var dropped []string
	for name, keep := range extra {
		if !keep {
			dropped = append(dropped, name)
		}
	}
	wantSpans := sent.Spans - int64(len(dropped))
	if want := int64(worldSize*(lensemu.JobSpans+steps*lensemu.SpansPerStep(2)) + len(extra)); sent.Spans != want {
		t.Fatalf("acknowledged %d spans, the job has %d", sent.Spans, want)
	}
	t.Logf("acknowledged: %s; %d spans expected downstream (health checks %v dropped)", describe(sent), wantSpans, dropped)

	// Prometheus: the metrics pipeline has no sampling, the values are
	// there within a batch timeout. Checked while the collector runs.
	checkPrometheus(t, promPort, runID, worldSize, steps, cluster)

	waitFor(t, deliveryTimeout, "every kept span in Jaeger", func() bool { return int64(jaeger.SpanCount(t, "nemo")) >= wantSpans })
	if withWeave {
		waitFor(t, deliveryTimeout, "every kept span at the fake Weave", func() bool { return int64(weave.Count(otlpsink.Traces)) >= wantSpans })
	}
	c.Stop()

	// After a clean stop nothing is in flight: the counts are final.
	// Redaction and enrichment problems are tallied and reported once each.
	found := findings{}
	defer found.report(t)
	archive := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if archive.Spans != wantSpans || archive.DataPoints != sent.DataPoints || archive.LogRecords != sent.LogRecords {
		t.Errorf("JSONL archive holds %s; want %d spans, %d data points, %d log records",
			describe(archive.Result), wantSpans, sent.DataPoints, sent.LogRecords)
	}
	if want := []string{fmt.Sprintf("%d/megatron.optimizer_step", errorRank)}; !slices.Equal(archive.ErrorSpans, want) {
		t.Errorf("error spans in the archive: %v, want %v", archive.ErrorSpans, want)
	}
	archiveIDs := map[string]bool{}
	for _, rec := range archive.SpanRecords {
		archiveIDs[rec.str("trace_id")+"/"+rec.str("span_id")] = true
		checkNoHealthCheck(t, "archive", rec.str("name"), dropped)
		found.resource("archive traces.jsonl", rec.resource(), redactedKey, cluster)
		if _, ok := rec.attributes()[redactedKey]; ok {
			found.add("archive traces.jsonl: a span attribute " + redactedKey)
		}
	}
	if len(archiveIDs) != int(wantSpans) {
		t.Errorf("the archive holds %d distinct spans, want %d", len(archiveIDs), wantSpans)
	}
	found.archiveSignals(t, env["NEMO_TELEMETRY_DIR"], redactedKey, cluster)

	// Jaeger: exactly the kept spans, the same ones as in the archive.
	traces := jaeger.Traces(t, "nemo")
	jaegerIDs := map[string]bool{}
	var errorSpans []string
	for _, tr := range traces {
		for _, p := range tr.Processes {
			if got := p.tag("cluster.name"); got != cluster {
				found.add(fmt.Sprintf("Jaeger: a process without cluster.name=%s (got %q)", cluster, got))
			}
			if p.has(redactedKey) {
				found.add("Jaeger: a process tag " + redactedKey)
			}
		}
		for _, s := range tr.Spans {
			jaegerIDs[padTraceID(s.TraceID)+"/"+s.SpanID] = true
			checkNoHealthCheck(t, "Jaeger", s.OperationName, dropped)
			if s.has(redactedKey) {
				found.add("Jaeger: a span tag " + redactedKey)
			}
			if s.tag("error") == "true" || s.tag("otel.status_code") == "ERROR" {
				errorSpans = append(errorSpans, tr.Processes[s.ProcessID].tag("service.instance.id")+"/"+s.OperationName)
			}
		}
	}
	if len(jaegerIDs) != int(wantSpans) {
		t.Errorf("Jaeger holds %d distinct spans of service nemo, want %d", len(jaegerIDs), wantSpans)
	}
	if !sameKeys(jaegerIDs, archiveIDs) {
		t.Errorf("Jaeger and the archive hold different spans")
	}
	if want := []string{fmt.Sprintf("%s-rank%d/megatron.optimizer_step", runID, errorRank)}; !slices.Equal(errorSpans, want) {
		t.Errorf("error spans in Jaeger: %v, want %v", errorSpans, want)
	}
	// One trace per rank (its megatron.pretrain root) and the checkpoint span's.
	if len(traces) != worldSize+1 {
		t.Errorf("Jaeger holds %d traces of service nemo, want %d", len(traces), worldSize+1)
	}

	if !withWeave {
		if n := len(weave.Requests()); n != 0 {
			t.Errorf("%s sent %d requests to Weave", preset, n)
		}
		return
	}
	// Weave: the same spans, once each, routed to WANDB_ENTITY/WANDB_PROJECT.
	if got := weave.Count(otlpsink.Traces); got != int(wantSpans) {
		t.Errorf("the fake Weave got %d spans, want %d", got, wantSpans)
	}
	if got := distinctSpans(weave); got != int(wantSpans) {
		t.Errorf("the fake Weave got %d distinct spans, want %d", got, wantSpans)
	}
	if weave.Refused() != 0 {
		t.Errorf("the fake Weave refused %d requests (bad API key?)", weave.Refused())
	}
	weaveIDs := map[string]bool{}
	for _, r := range weave.Requests() {
		rss := r.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			res := rss.At(i).Resource().Attributes()
			found.resource("Weave", res.AsRaw(), redactedKey, cluster)
			e, _ := res.Get("wandb.entity")
			p, _ := res.Get("wandb.project")
			if e.AsString() != entity || p.AsString() != project {
				t.Errorf("Weave resource routed to %q/%q, want %s/%s", e.AsString(), p.AsString(), entity, project)
			}
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					s := spans.At(k)
					tid, sid := s.TraceID(), s.SpanID()
					weaveIDs[hexID(tid[:])+"/"+hexID(sid[:])] = true
					checkNoHealthCheck(t, "Weave", s.Name(), dropped)
					if _, ok := s.Attributes().Get(redactedKey); ok {
						found.add("Weave: a span attribute " + redactedKey)
					}
				}
			}
		}
	}
	if !sameKeys(weaveIDs, archiveIDs) {
		t.Errorf("Weave and the archive hold different spans")
	}
}

// sendExtraSpans sends, as rank 0 of the job, spans the emulator does not
// make: four health checks (caught by name, by route, by the page's exact
// name, by path) and a
// checkpoint span carrying user.email as a span attribute. It returns each
// span name and whether the preset must keep it.
func sendExtraSpans(t *testing.T, endpoint string, res []attribute.KeyValue, email string) map[string]bool {
	t.Helper()
	spans := map[string][]attribute.KeyValue{
		"nemo.health_check": nil,
		"GET /health": {
			attribute.String("http.route", "/health"),
			attribute.String("url.path", "/health"),
			attribute.String("http.request.method", "GET"),
		},
		// The NeMo Lens page's own example, caught by its name alone.
		"GET /healthz": nil,
		// A probe named by its method only (HTTP semantic conventions
		// without a route), caught by its path.
		"GET": {
			attribute.String("url.path", "/readyz"),
			attribute.String("http.request.method", "GET"),
		},
		"megatron.save_checkpoint": {
			attribute.Int("megatron.iteration", 3),
			attribute.String("user.email", email),
		},
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewSchemaless(res...)), sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("nemo.lens")
	for name, attrs := range spans {
		_, s := tracer.Start(t.Context(), name, trace.WithAttributes(attrs...))
		s.End()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatalf("OTLP exporter: %v", err)
	}
	if err := exp.ExportSpans(ctx, rec.Ended()); err != nil {
		t.Fatalf("export the extra spans: %v", err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatalf("shut the exporter down: %v", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	for name := range spans {
		keep[name] = name == "megatron.save_checkpoint"
	}
	return keep
}

// checkPrometheus scrapes the Prometheus exporter until every rank's last
// values are there, then checks the names and types the exporter renders
// and the labels that come from resource attributes.
func checkPrometheus(t *testing.T, port int, runID string, worldSize, steps int, cluster string) {
	t.Helper()
	scrapeURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	var body []byte
	lastLoss := lensfixture.Loss(int64(steps)) // what the emulator records at the last step
	instance := func(rank int) string { return fmt.Sprintf("service_instance_id=%s-rank%d", runID, rank) }
	waitFor(t, deliveryTimeout, "every rank's metrics on the Prometheus exporter", func() bool {
		body = scrape(scrapeURL)
		for r := range worldSize {
			if n, ok := testcollector.SumMetric(body, "megatron_training_step_duration_ms_milliseconds_count", instance(r)); !ok || n != float64(steps) {
				return false
			}
		}
		return true
	})
	want := map[string]string{ // rendered name -> # TYPE
		"megatron_training_loss":                          "gauge",
		"megatron_training_throughput_tflops":             "gauge",
		"megatron_training_tokens_per_sec":                "gauge",
		"megatron_training_grad_norm":                     "gauge",
		"megatron_training_learning_rate":                 "gauge",
		"megatron_training_memory_allocated_gb_gigabytes": "gauge",
		"megatron_training_skipped_iters_total":           "counter",
		"megatron_training_step_duration_ms_milliseconds": "histogram",
	}
	types := promTypes(body)
	for name, typ := range want {
		if types[name] != typ {
			t.Errorf("Prometheus exporter: %s has # TYPE %q, want %q", name, types[name], typ)
		}
	}
	for r := range worldSize {
		checks := []struct {
			name string
			want float64
		}{
			{"megatron_training_loss", lastLoss},
			{"megatron_training_tokens_per_sec", 51200},
			{"megatron_training_step_duration_ms_milliseconds_count", float64(steps)},
			{"megatron_training_step_duration_ms_milliseconds_sum", float64(steps * 100)},
			{"megatron_training_skipped_iters_total", 0},
		}
		for _, ch := range checks {
			got, ok := testcollector.SumMetric(body, ch.name, instance(r), "cluster_name="+cluster, "nemo_run_id="+runID)
			if !ok || got != ch.want {
				t.Errorf("Prometheus exporter: %s{%s, cluster_name=%s} = %v (found %v), want %v", ch.name, instance(r), cluster, got, ok, ch.want)
			}
		}
	}
	if strings.Contains(string(body), "user_email") || strings.Contains(string(body), "@example.com") {
		t.Errorf("the Prometheus exporter exposes user.email, e.g.\n%s", grepLines(body, "megatron_training_loss{"))
	} else if t.Failed() {
		t.Logf("Prometheus exposition (megatron lines):\n%s", grepLines(body, "megatron_"))
	}
}

func scrape(u string) []byte {
	req, err := http.NewRequest(http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return b
}

// promTypes reads the "# TYPE name type" lines of a text exposition.
func promTypes(body []byte) map[string]string {
	types := map[string]string{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	return types
}

func grepLines(body []byte, substr string) string {
	var out []string
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// findings tallies problems seen on many records ("what" -> how often), so
// that a leak shows as one line per destination, not one per span.
type findings map[string]int

func (f findings) add(what string) { f[what]++ }

// resource checks one resource: cluster.name added, key removed.
func (f findings) resource(where string, res map[string]any, key, cluster string) {
	if _, ok := res[key]; ok {
		f.add(fmt.Sprintf("%s: a resource attribute %s", where, key))
	}
	if got, _ := res["cluster.name"].(string); got != cluster {
		f.add(fmt.Sprintf("%s: a resource without cluster.name=%s (got %q)", where, cluster, got))
	}
}

// archiveSignals checks the metrics and logs of the archive: cluster.name on
// every resource, key nowhere.
func (f findings) archiveSignals(t *testing.T, dir, key, cluster string) {
	t.Helper()
	for _, name := range []string{"metrics.jsonl", "logs.jsonl"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*", name+"*")) // name.zst by default
		if len(files) == 0 {
			t.Errorf("the archive has no %s", name)
		}
		for _, file := range files {
			eachLine(t, file, func(line []byte) {
				rec := decodeRecord(t, name, line)
				f.resource("archive "+name, rec.resource(), key, cluster)
				if _, ok := rec.attributes()[key]; ok {
					f.add(fmt.Sprintf("archive %s: a record attribute %s", name, key))
				}
			})
		}
	}
}

func (f findings) report(t *testing.T) {
	t.Helper()
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Errorf("%s (%d times)", k, f[k])
	}
}

func checkNoHealthCheck(t *testing.T, where, name string, dropped []string) {
	t.Helper()
	if slices.Contains(dropped, name) {
		t.Errorf("%s holds the health-check span %q", where, name)
	}
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func hexID(b []byte) string { return fmt.Sprintf("%x", b) }

// padTraceID restores the leading zeros Jaeger's JSON drops from a trace id
// whose high 64 bits are zero.
func padTraceID(id string) string {
	if len(id) < 32 {
		return strings.Repeat("0", 32-len(id)) + id
	}
	return id
}
