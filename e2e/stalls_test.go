// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// stallAfter is the tests' NEMO_STALL_AFTER: short, so that a test waits
// seconds, not the preset's minute.
const stallAfter = 3 * time.Second

// hungJob is a synchronous job of world ranks, two hosts (node-a the first
// half, node-b the second), that hangs at iteration 5 of 8; roles are the
// ranks' parts in it (the others block in the all-reduce).
func hungJob(c *testcollector.Collector, run string, world int, roles map[int]lensemu.HangRole, shape func(*lensemu.Rank)) []lensemu.Rank {
	return hungJobVia(func(int) *testcollector.Collector { return c }, run, world, roles, shape)
}

// hungJobVia is hungJob with each rank sending to collectorOf(rank).
func hungJobVia(collectorOf func(rank int) *testcollector.Collector, run string, world int, roles map[int]lensemu.HangRole, shape func(*lensemu.Rank)) []lensemu.Rank {
	ranks := jobVia(collectorOf, run, world, 8)
	for i := range ranks {
		host := "node-a"
		if i >= world/2 {
			host = "node-b"
		}
		ranks[i].Resource = append(ranks[i].Resource, attribute.String(attrkey.HostName, host))
		ranks[i].HangAt = 5
		ranks[i].HangRole = roles[i]
		if shape != nil {
			shape(&ranks[i])
		}
	}
	return ranks
}

// stallShapes are the four ways Megatron's steps arrive: either taxonomy's
// step span, a child of the job span or its own trace root.
var stallShapes = map[string]func(*lensemu.Rank){
	"train_step/in_job":        nil,
	"train.iteration/in_job":   func(r *lensemu.Rank) { r.StepSpanName = attrkey.MegatronTrainIteration },
	"train_step/own_root":      func(r *lensemu.Rank) { r.StepsAreRoots = true },
	"train.iteration/own_root": func(r *lensemu.Rank) { r.StepSpanName, r.StepsAreRoots = attrkey.MegatronTrainIteration, true },
}

// stallCollector starts the default preset with NEMO_STALL_AFTER set to
// stallAfter and returns it with its output directory.
func stallCollector(t *testing.T) (*testcollector.Collector, string) {
	t.Helper()
	env := testEnv(t)
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	return testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env}), env["NEMO_TELEMETRY_DIR"]
}

// runName is a run id for a test of shape.
func runName(prefix, shape string) string {
	return prefix + "-" + strings.NewReplacer("/", "-", ".", "-").Replace(shape)
}

// stallRecords waits for the run's stall records of event in the default
// preset's output and returns them.
func stallRecords(t *testing.T, dir, run, event string) []record {
	t.Helper()
	var got []record
	waitFor(t, deliveryTimeout, fmt.Sprintf("a %s record of %s", event, run), func() bool {
		got = stallRecordsOf(readTelemetry(t, dir), run, event)
		return len(got) > 0
	})
	return got
}

// stallRecordsOf are run's stall records of event in got.
func stallRecordsOf(got telemetry, run, event string) []record {
	var out []record
	for _, rec := range got.StallRecords {
		if rec.str("body") != "" && rec.attributes()["event.name"] == event && rec.resource()["nemo.run.id"] == run {
			out = append(out, rec)
		}
	}
	return out
}

func ints(t *testing.T, v any) []int64 {
	t.Helper()
	list, _ := v.([]any)
	out := make([]int64, 0, len(list))
	for _, x := range list {
		n, err := x.(json.Number).Int64()
		if err != nil {
			t.Fatalf("%v is not an int list: %v", v, err)
		}
		out = append(out, n)
	}
	return out
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestStallNamesTheStoppedRank: through the default preset as committed,
// a job hangs at iteration 5 because rank 2 stops in its forward; the
// others finish backward and block in grad sync, and their SDKs export
// what ended. One stall record (WARN) lands in the run's logs JSONL, next
// to its traces, naming rank 2 and its host (node-b), within NEMO_STALL_AFTER and
// the export delay; in both taxonomies and trace shapes.
func TestStallNamesTheStoppedRank(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			c, dir := stallCollector(t)
			run := runName("run-hang", name)
			runJob(t, hungJob(c, run, 4, map[int]lensemu.HangRole{2: lensemu.Stopped}, shape))
			sent := time.Now()
			rec := stallRecords(t, dir, run, "nemo.run.stalled")[0]
			t.Logf("stall record %s after the job's last export; %s", time.Since(sent).Round(100*time.Millisecond), rec.str("body"))
			attrs := rec.attributes()
			if got := ints(t, attrs["nemo.stall.culprit_ranks"]); !slices.Equal(got, []int64{2}) {
				t.Errorf("culprit ranks %v, want [2]", got)
			}
			if got := strs(attrs["nemo.stall.culprit_hosts"]); !slices.Equal(got, []string{"node-b"}) {
				t.Errorf("culprit hosts %v, want [node-b]", got)
			}
			if attrs["nemo.stall.kind"] != "behind" || rec.str("severity_text") != "WARN" {
				t.Errorf("kind %v, severity %q: want behind, WARN", attrs["nemo.stall.kind"], rec.str("severity_text"))
			}
			if it, _ := attrs["nemo.stall.iteration"].(json.Number).Int64(); it != 5 {
				t.Errorf("iteration %v, want 5", attrs["nemo.stall.iteration"])
			}
			if !strings.Contains(rec.str("body"), "rank 2 on node-b last finished megatron.microbatch.forward") {
				t.Errorf("body does not say where rank 2 stopped: %s", rec.str("body"))
			}
			if !strings.Contains(c.Logs(), "stalled at iteration 5") {
				t.Errorf("the collector's own log has no stall line")
			}
			c.Stop()
		})
	}
}

// TestStallNamesALostNode: every rank of node-b dies before iteration 5
// (and, alone, one rank of node-a); the stall names exactly those ranks and
// node-b as lost, in all four shapes.
func TestStallNamesALostNode(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			c, dir := stallCollector(t)
			run := runName("run-lost-node", name)
			roles := map[int]lensemu.HangRole{1: lensemu.Dead, 4: lensemu.Dead, 5: lensemu.Dead, 6: lensemu.Dead, 7: lensemu.Dead}
			runJob(t, hungJob(c, run, 8, roles, shape))
			rec := stallRecords(t, dir, run, "nemo.run.stalled")[0]
			attrs := rec.attributes()
			if got := ints(t, attrs["nemo.stall.culprit_ranks"]); !slices.Equal(got, []int64{1, 4, 5, 6, 7}) {
				t.Errorf("culprit ranks %v, want [1 4 5 6 7]", got)
			}
			if got := strs(attrs["nemo.stall.culprit_hosts"]); !slices.Equal(got, []string{"node-a", "node-b"}) {
				t.Errorf("culprit hosts %v, want [node-a node-b]", got)
			}
			if got := strs(attrs["nemo.stall.lost_hosts"]); !slices.Equal(got, []string{"node-b"}) {
				t.Errorf("lost hosts %v, want [node-b]: %s", got, rec.str("body"))
			}
			c.Stop()
		})
	}
}

// TestEvenPauseIsPaused: every rank pauses before iteration 5 for longer
// than NEMO_STALL_AFTER (a checkpoint save) and then trains on: a stall of
// kind paused that names nobody, then a resumed record; and nothing of the
// job is lost or miscounted by the records.
func TestEvenPauseIsPaused(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			c, dir := stallCollector(t)
			run := runName("run-ckpt", name)
			ranks := jobVia(func(int) *testcollector.Collector { return c }, run, 4, 6)
			for i := range ranks {
				ranks[i].PauseBefore, ranks[i].Pause = 5, stallAfter+4*time.Second
				if shape != nil {
					shape(&ranks[i])
				}
			}
			sent := runJob(t, ranks)
			stalled := stallRecords(t, dir, run, "nemo.run.stalled")
			if attrs := stalled[0].attributes(); attrs["nemo.stall.kind"] != "paused" || len(ints(t, attrs["nemo.stall.culprit_ranks"])) != 0 {
				t.Errorf("an even pause: want kind paused and no culprit, got %v", attrs)
			}
			stallRecords(t, dir, run, "nemo.run.resumed")
			c.Stop()
			if got := readTelemetry(t, dir).Result; got != sent {
				t.Errorf("output holds %s; acknowledged %s", describe(got), describe(sent))
			}
		})
	}
}

// TestWedgedCollectiveIsWedged: every rank of a job stops inside the
// all-reduce of iteration 5 (each ended grad_sync.start, none its finish: a
// collective that never completes); the stall record says wedged and names
// no rank behind. (The goodput goldens count a wedge as stalled time.)
func TestWedgedCollectiveIsWedged(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			c, dir := stallCollector(t)
			run := runName("run-wedge", name)
			runJob(t, hungJob(c, run, 4, nil, shape))
			rec := stallRecords(t, dir, run, "nemo.run.stalled")[0]
			attrs := rec.attributes()
			if attrs["nemo.stall.kind"] != "wedged" || len(ints(t, attrs["nemo.stall.culprit_ranks"])) != 0 {
				t.Errorf("every rank inside the collective: want kind wedged and no culprit, got %v", attrs)
			}
			if !strings.Contains(rec.str("body"), "wedged at iteration 5") {
				t.Errorf("body: %s", rec.str("body"))
			}
			c.Stop()
		})
	}
}

// TestStallAlertFires: a real Prometheus scrapes the jaeger preset and
// evaluates deploy/prometheus/alerts.yaml while a job hangs (rank 1 stops
// in its forward): NemoRunStalled fires for the run, and NemoRankBehind
// for rank 1 on its host, and for no other rank.
func TestStallAlertFires(t *testing.T) {
	requirePrometheus(t)
	exporterPort := testcollector.FreePort(t)
	env := testEnv(t)
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	env["JAEGER_OTLP_ENDPOINT"] = fmt.Sprintf("127.0.0.1:%d", testcollector.FreePort(t)) // nobody: Jaeger's queue waits
	env["PROMETHEUS_EXPORTER_PORT"] = strconv.Itoa(exporterPort)
	c := testcollector.Start(t, testcollector.Config(t, "jaeger.yaml"), testcollector.Options{Env: env})
	prom := startPrometheus(t, nil, collectorTargets(c, exporterPort)...)

	const run = "run-stall-alert"
	runJob(t, hungJob(c, run, 4, map[int]lensemu.HangRole{1: lensemu.Stopped}, nil))
	alert := prom.waitForAlert(t, deliveryTimeout, "NemoRunStalled", map[string]string{"nemo_run_id": run})
	t.Logf("NemoRunStalled: %s", alert.Annotations["summary"])
	behind := prom.waitForAlert(t, deliveryTimeout, "NemoRankBehind", map[string]string{"nemo_run_id": run})
	if behind.Labels["nv_dl_rank"] != "1" || behind.Labels["host_name"] != "node-a" {
		t.Errorf("NemoRankBehind fired for %v, want rank 1 on node-a", behind.Labels)
	}
	if all := prom.firing(t, "NemoRankBehind", map[string]string{"nemo_run_id": run}); len(all) != 1 {
		t.Errorf("NemoRankBehind fires %d times, want once (rank 1): %v", len(all), all)
	}
	c.Stop()
}

// TestStallDetectorOff: the default preset with NEMO_STALLS=false finds no
// stall. The same hang goes at once to the preset as committed, which
// finds it; by then the preset without the detector has had as long, and
// after its drain its output holds no stall record and no stall gauge,
// while the step metrics of the run are there.
func TestStallDetectorOff(t *testing.T) {
	on, onDir := stallCollector(t)
	env := testEnv(t)
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	env["NEMO_STALLS"] = "false"
	off := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	const run = "run-hang-off"
	roles := map[int]lensemu.HangRole{2: lensemu.Stopped}
	runJob(t, append(hungJob(on, run, 4, roles, nil), hungJob(off, run, 4, roles, nil)...))
	stallRecords(t, onDir, run, "nemo.run.stalled")
	off.Stop()
	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if len(got.StallRecords) != 0 {
		t.Errorf("NEMO_STALLS=false: %d stall records, want none: %v", len(got.StallRecords), got.StallRecords[0])
	}
	steps := 0
	for _, p := range got.StepPoints {
		name := p.str("name")
		if name == "nemo.run.stalled" || name == "nemo.run.stall_duration" || name == "nemo.rank.behind" {
			t.Errorf("NEMO_STALLS=false: a stall gauge %s", name)
		}
		if strings.HasPrefix(name, "nemo.step.") {
			steps++
		}
	}
	if steps == 0 {
		t.Error("NEMO_STALLS=false: no step metrics either; the step metrics must not depend on the detector")
	}
	if !strings.Contains(off.Logs(), "stall detection is off") {
		t.Error("the collector's log does not say that stall detection is off")
	}
	on.Stop()
}
