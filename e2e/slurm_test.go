// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestSlurmJobs submits deploy/slurm/nemo-telemetry.sbatch, as committed, to
// a real one-node SLURM cluster started here (munged, slurmctld, slurmd from
// Debian's slurm-wlm and munge), with emulated NeMo Lens ranks
// (internal/testing/lensemu/cmd/lensrank) as the training command. Each rank writes
// what the collector acknowledged; the test compares it with the job's JSONL.
func TestSlurmJobs(t *testing.T) {
	requireSlurm(t)
	lensrank := buildLensrank(t)
	cluster := startSlurmCluster(t)
	work := t.TempDir()
	// The collector "binary" starts the real one two seconds late: ranks that
	// did not wait for every node's health check would find nothing listening.
	slowStart := filepath.Join(work, "otelcol-nemo-slow-start")
	script := "#!/bin/sh\nsleep 2\nexec " + testcollector.Binary(t) + " \"$@\"\n"
	if err := os.WriteFile(slowStart, []byte(script), 0o755); err != nil { //nolint:gosec // G306: a shell script the SLURM job executes, so it must be executable
		t.Fatal(err)
	}
	submit := func(t *testing.T, env map[string]string, sbatchArgs []string, rankArgs ...string) string {
		t.Helper()
		args := append([]string{"--parsable", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--chdir=" + work}, sbatchArgs...)
		args = append(append(args, filepath.Join(testcollector.RepoRoot(t), "deploy", "slurm", "nemo-telemetry.sbatch"), lensrank, "-out", filepath.Join(work, "ranks")), rankArgs...)
		jobEnv := map[string]string{
			"NEMO_SLURM_DIR":        filepath.Join(testcollector.RepoRoot(t), "deploy", "slurm"),
			"OTELCOL_NEMO_BIN":      slowStart,
			"NEMO_COLLECTOR_CONFIG": testcollector.Config(t, "file.yaml"),
			"NEMO_TELEMETRY_DIR":    filepath.Join(work, "telemetry"),
			"NEMO_RANK_STRATEGY":    "all_ranks",
		}
		maps.Copy(jobEnv, env)
		return cluster.sbatch(t, jobEnv, args...)
	}
	logOnFailure(t, func() string { return filesUnder(work, ".out", "collector.log") })

	t.Run("ArrayTasksAreRunsWithTheirSlurmAttributes", func(t *testing.T) {
		arrayID := submit(t, nil, []string{"--array=0-1", "--job-name=nemo-e2e-array", "--output=%x-%A_%a.out"}, "-segments", "2", "-steps", "3")
		cluster.waitGone(t, arrayID, 3*time.Minute)
		tasks := cluster.jobs(t, arrayID)
		if len(tasks) != 2 {
			t.Fatalf("array job %s: want 2 tasks, scontrol shows %d: %v", arrayID, len(tasks), tasks)
		}
		seenTasks := map[string]bool{}
		for _, task := range tasks {
			jobID, taskID := task["JobId"], task["ArrayTaskId"]
			if task["JobState"] != "COMPLETED" || task["ExitCode"] != "0:0" {
				t.Fatalf("task %s (job %s): state %s, exit code %s", taskID, jobID, task["JobState"], task["ExitCode"])
			}
			seenTasks[taskID] = true
			reports := readRankReports(t, filepath.Join(work, "ranks", jobID, "0"), 2)
			got := readTelemetry(t, filepath.Join(work, "telemetry", jobID))
			if len(got.ByRun) != 1 || got.ByRun[jobID].Spans == 0 {
				t.Fatalf("task %s: want one run %q in its directory, got %v", taskID, jobID, got.ByRun)
			}
			for rank, rep := range reports {
				if !rep.Done || len(rep.Errors) > 0 || rep.RunID != jobID {
					t.Fatalf("task %s rank %d: %+v", taskID, rank, rep)
				}
				if got.ByRank[int64(rank)] != rep.Acknowledged {
					t.Errorf("task %s rank %d: files hold %s, the collector acknowledged %s",
						taskID, rank, describe(got.ByRank[int64(rank)]), describe(rep.Acknowledged))
				}
			}
			want := map[string]string{
				"nemo.run.id": jobID, "slurm.job.id": jobID, "slurm.job.name": "nemo-e2e-array",
				"slurm.nodelist": cluster.host, "slurm.ntasks": "2", "slurm.restart_count": "0",
				"slurm.array_job.id": arrayID, "slurm.array_task.id": taskID,
			}
			checkResourceAttributes(t, got.SpanRecords, want)
			for file := range got.ByFile {
				if !strings.HasPrefix(file, cluster.host+"/"+jobID+"/") {
					t.Errorf("task %s: output file %s is not under <node>/<run id>/", taskID, file)
				}
			}
			checkCollectorExitedCleanly(t, filepath.Join(work, "telemetry", jobID, cluster.host, "collector.log"))
		}
		if !seenTasks["0"] || !seenTasks["1"] {
			t.Errorf("array task ids: want 0 and 1, got %v", seenTasks)
		}
	})

	t.Run("PortInUseIsRefused", func(t *testing.T) {
		// Another job's collector (here: a plain listener) holds the port.
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
		jobID := submit(t, map[string]string{"OTLP_GRPC_PORT": port}, []string{"--job-name=nemo-e2e-port", "--output=%x-%j.out"})
		cluster.waitGone(t, jobID, 2*time.Minute)
		if job := cluster.jobs(t, jobID)[0]; job["JobState"] != "FAILED" {
			t.Fatalf("job %s with its port taken: state %s, exit code %s", jobID, job["JobState"], job["ExitCode"])
		}
		out, err := os.ReadFile(filepath.Join(work, "nemo-e2e-port-"+jobID+".out"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte("port "+port+" is already in use")) {
			t.Fatalf("job output does not name the taken port %s:\n%s", port, out)
		}
		if reports := peekRankReports(filepath.Join(work, "ranks", jobID, "0")); len(reports) > 0 {
			t.Fatalf("ranks ran although the collector could not start: %v", reports)
		}
	})

	t.Run("ScancelLosesNothingAcknowledged", func(t *testing.T) {
		jobID := submit(t, nil, []string{"--job-name=nemo-e2e-scancel", "--output=%x-%j.out"}, "-segments", "100000", "-steps", "3", "-pause", "50ms")
		reportsDir := filepath.Join(work, "ranks", jobID, "0")
		waitFor(t, 2*time.Minute, "both ranks to report 5 acknowledged segments", func() bool {
			if state := cluster.jobs(t, jobID)[0]["JobState"]; state != "RUNNING" && state != "PENDING" {
				t.Fatalf("job %s is %s before it was cancelled", jobID, state)
			}
			reports := peekRankReports(reportsDir)
			return len(reports) == 2 && reports[0].Segments >= 5 && reports[1].Segments >= 5
		})
		cancelled := time.Now()
		if out, err := cluster.command("scancel", jobID); err != nil {
			t.Fatalf("scancel %s: %v\n%s", jobID, err, out)
		}
		cluster.waitGone(t, jobID, 2*time.Minute)
		t.Logf("job %s gone %s after scancel (KillWait 30s)", jobID, time.Since(cancelled).Round(100*time.Millisecond))
		if state := cluster.jobs(t, jobID)[0]["JobState"]; state != "CANCELLED" {
			t.Fatalf("job %s: state %s after scancel", jobID, state)
		}
		checkCollectorExitedCleanly(t, filepath.Join(work, "telemetry", jobID, cluster.host, "collector.log"))

		reports := readRankReports(t, reportsDir, 2)
		got := readTelemetry(t, filepath.Join(work, "telemetry", jobID))
		if len(got.ByRun) != 1 || got.ByRun[jobID].Spans == 0 {
			t.Fatalf("want one run %q, got %v", jobID, got.ByRun)
		}
		for rank, rep := range reports {
			if rep.Done {
				t.Fatalf("rank %d finished all its segments: the job was not cancelled mid-run", rank)
			}
			ack, files := rep.Acknowledged, got.ByRank[int64(rank)]
			if ack.Spans == 0 || ack.DataPoints == 0 || ack.LogRecords == 0 {
				t.Fatalf("rank %d acknowledged nothing of some signal: %s", rank, describe(ack))
			}
			if files.Spans < ack.Spans || files.DataPoints < ack.DataPoints || files.LogRecords < ack.LogRecords {
				t.Errorf("rank %d: the collector acknowledged %s but the files hold %s", rank, describe(ack), describe(files))
			}
			t.Logf("rank %d: %d segments, acknowledged %s, files %s", rank, rep.Segments, describe(ack), describe(files))
		}
	})

	t.Run("RequeueKeepsTheRunAndCountsRestarts", func(t *testing.T) {
		jobID := submit(t, nil, []string{"--requeue", "--job-name=nemo-e2e-requeue", "--output=%x-%j.out", "--open-mode=append"},
			"-segments", "100000", "-steps", "3", "-pause", "50ms")
		attempt := func(restart int) {
			dir := filepath.Join(work, "ranks", jobID, strconv.Itoa(restart))
			waitFor(t, 2*time.Minute, fmt.Sprintf("both ranks of attempt %d to report 3 segments", restart), func() bool {
				reports := peekRankReports(dir)
				return len(reports) == 2 && reports[0].Segments >= 3 && reports[1].Segments >= 3
			})
		}
		attempt(0)
		requeued := time.Now()
		if out, err := cluster.command("scontrol", "requeue", jobID); err != nil {
			t.Fatalf("scontrol requeue %s: %v\n%s", jobID, err, out)
		}
		// SLURM holds a requeued job back for a while (BeginTime); release it
		// once the first attempt is gone from the node, and in a later second
		// than the requeue: slurmd refuses a job credential issued in the
		// second its predecessor was revoked ("Job credential revoked").
		waitFor(t, time.Minute, "job "+jobID+" to be pending on an idle node", func() bool {
			out, err := cluster.command("sinfo", "-h", "-o", "%T")
			return cluster.jobs(t, jobID)[0]["JobState"] == "PENDING" && err == nil && strings.TrimSpace(out) == "idle"
		})
		time.Sleep(time.Until(requeued.Add(2 * time.Second)))
		if out, err := cluster.command("scontrol", "update", "JobId="+jobID, "StartTime=now"); err != nil {
			t.Fatalf("release %s: %v\n%s", jobID, err, out)
		}
		attempt(1)
		if out, err := cluster.command("scancel", jobID); err != nil {
			t.Fatalf("scancel %s: %v\n%s", jobID, err, out)
		}
		cluster.waitGone(t, jobID, 2*time.Minute)
		if restarts := cluster.jobs(t, jobID)[0]["Restarts"]; restarts != "1" {
			t.Fatalf("job %s: Restarts=%s, want 1", jobID, restarts)
		}

		got := readTelemetry(t, filepath.Join(work, "telemetry", jobID))
		if len(got.ByRun) != 1 || got.ByRun[jobID].Spans == 0 {
			t.Fatalf("want one run %q over both attempts, got %v", jobID, got.ByRun)
		}
		spans := map[string]int64{} // by "rank/restart"
		for _, s := range got.SpanRecords {
			spans[fmt.Sprintf("%d/%v", s.rank(), s.resource()["slurm.restart_count"])]++
		}
		for restart := 0; restart <= 1; restart++ {
			for rank, rep := range readRankReports(t, filepath.Join(work, "ranks", jobID, strconv.Itoa(restart)), 2) {
				key := fmt.Sprintf("%d/%d", rank, restart)
				if rep.Acknowledged.Spans == 0 || spans[key] < rep.Acknowledged.Spans {
					t.Errorf("rank %d, attempt %d: acknowledged %d spans, the files hold %d with slurm.restart_count=%d",
						rank, restart, rep.Acknowledged.Spans, spans[key], restart)
				}
			}
		}
		t.Logf("spans by rank/restart: %v", spans)
		// Both attempts' collectors appended to the node's log; both exited 0.
		log, err := os.ReadFile(filepath.Join(work, "telemetry", jobID, cluster.host, "collector.log"))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(log, []byte("collector exited with status 0")); n != 2 {
			t.Errorf("collector log records %d clean exits, want 2 (one per attempt)", n)
		}
	})
}

// lensrankReport is what internal/testing/lensemu/cmd/lensrank writes per rank.
type lensrankReport struct {
	JobID, RunID               string
	Rank, LocalRank, WorldSize int
	Segments                   int
	Done                       bool
	Acknowledged               lensemu.Result
	Errors                     []string
}

// peekRankReports reads the reports written so far, by rank.
func peekRankReports(dir string) map[int]lensrankReport {
	reports := map[int]lensrankReport{}
	paths, _ := filepath.Glob(filepath.Join(dir, "rank-*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		var rep lensrankReport
		if err == nil && json.Unmarshal(b, &rep) == nil {
			reports[rep.Rank] = rep
		}
	}
	return reports
}

// readRankReports reads the reports of ranks 0..n-1 of one job.
func readRankReports(t *testing.T, dir string, n int) map[int]lensrankReport {
	t.Helper()
	reports := peekRankReports(dir)
	for rank := range n {
		if _, ok := reports[rank]; !ok {
			t.Fatalf("no report from rank %d in %s (got ranks %v)", rank, dir, reports)
		}
	}
	return reports
}

// checkResourceAttributes checks that every span's resource has the values.
func checkResourceAttributes(t *testing.T, spans []record, want map[string]string) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		res := s.resource()
		for k, v := range want {
			if got := fmt.Sprint(res[k]); got != v {
				t.Fatalf("span %s: resource %s = %q, want %q (resource: %v)", s.str("name"), k, got, v, res)
			}
		}
	}
}

// checkCollectorExitedCleanly reads a node's collector log for the exit
// status otelcol-nemo-node.sh records: 0 means the collector shut down on
// SIGTERM, writing what it had acknowledged, before anything killed it.
func checkCollectorExitedCleanly(t *testing.T, logPath string) {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("collector log: %v", err)
	}
	if !bytes.Contains(b, []byte("collector exited with status 0")) {
		t.Fatalf("%s does not record a clean exit:\n%s", logPath, tailFile(logPath, 3000))
	}
}

// logOnFailure logs what files returns when the test has failed.
func logOnFailure(t *testing.T, files func() string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(files())
		}
	})
}

// filesUnder returns the tails of the files under dir whose names end with
// one of the suffixes.
func filesUnder(dir string, suffixes ...string) string {
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			for _, s := range suffixes {
				if strings.HasSuffix(p, s) {
					paths = append(paths, p)
				}
			}
		}
		return nil
	})
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "== %s\n%s\n", p, tailFile(p, 3000))
	}
	return b.String()
}

// tailFile returns the last n bytes of a file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
