// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// goodputRun is the emulated run of the goodput test, two attempts of 4
// synchronous ranks on two hosts computing 2s a step: the first sets up
// for 20s (the last 4s loading a checkpoint), trains iterations 1 to 15
// (rank 2 computes 3s on 3 to 8: a straggler the others wait for), saves a
// checkpoint after every fifth iteration (3s) and evaluates after every
// twelfth (2s), then hangs in 14: rank 1 stops in its forward, the others
// block in the all-reduce. The job is killed and relaunched 150s after it
// began, with new processes: it loads the checkpoint of iteration 10 and
// trains 11 to 25 to the end (11 to 13 were lost). Every category is seconds to minutes of a
// wall time of about 4 minutes, so that 1% of it tells them apart.
func goodputRun(c *testcollector.Collector, run string, shape func(*lensemu.Rank)) (first, second []lensemu.Rank) {
	return goodputRunVia(func(int) *testcollector.Collector { return c }, run, shape)
}

// goodputRunVia is goodputRun with each rank sending to collectorOf(rank).
func goodputRunVia(collectorOf func(rank int) *testcollector.Collector, run string, shape func(*lensemu.Rank)) (first, second []lensemu.Rank) {
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	attempt := func(n int) []lensemu.Rank {
		ranks := jobVia(collectorOf, run, 4, 25)
		for i := range ranks {
			r := &ranks[i]
			host := "gp-node-a"
			if i >= 2 {
				host = "gp-node-b"
			}
			r.Resource = append(r.Resource, attribute.String(attrkey.HostName, host), attribute.Int("process.pid", 1000*n+i))
			r.Start = start.Add(time.Duration(n-1) * 150 * time.Second)
			r.Setup, r.CheckpointLoad = 20*time.Second, 4*time.Second
			r.SaveEvery, r.SaveDuration = 5, 3*time.Second
			r.EvalEvery, r.EvalDuration = 12, 2*time.Second
			r.NoMetrics, r.NoLogs = true, true
			slow := i == 2
			r.ComputeDuration = func(it int) time.Duration {
				if slow && it >= 3 && it <= 8 {
					return 3 * time.Second
				}
				return 2 * time.Second
			}
			if shape != nil {
				shape(r)
			}
		}
		return ranks
	}
	first, second = attempt(1), attempt(2)
	for i := range first {
		first[i].HangAt, first[i].HangRole = 14, lensemu.Blocked
		second[i].FirstIteration = 11
	}
	first[1].HangRole = lensemu.Stopped
	return first, second
}

// TestGoodputMatchesTheEmulatorsAccount: through the default preset as
// committed, the run above; the run's last nemo.run.goodput record (when
// its job spans end) gives every category within 1% of the wall time of
// the emulator's own account (lensemu.Account, from what the ranks were
// told to do), and the categories add up to the wall time; its goodput
// is productive over wall. In both taxonomies and trace shapes.
func TestGoodputMatchesTheEmulatorsAccount(t *testing.T) {
	env := testEnv(t)
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	env["NEMO_STRAGGLER_WAIT"] = "2s" // a run's end is emitted a decision wait after it
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	dir := env["NEMO_TELEMETRY_DIR"]
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			run := runName("run-goodput", name)
			first, second := goodputRun(c, run, shape)
			checkGoodputAccount(t, dir, run, first, second)
		})
	}
}

// checkGoodputAccount runs the two attempts of goodputRun and compares the
// run's final goodput record in dir with the emulator's account.
func checkGoodputAccount(t *testing.T, dir, run string, first, second []lensemu.Rank) {
	t.Helper()
	runJob(t, first)
	// The hang is found (stall_after and a tick) before the relaunch.
	stallRecords(t, dir, run, "nemo.run.stalled")
	runJob(t, second)

	final := waitFinalGoodput(t, dir, run)
	checkAccount(t, final.attributes(), lensemu.Account(first, second))
	t.Logf("%s", final.str("body"))
}

// finalGoodputOf is run's final nemo.run.goodput record in got, if written.
func finalGoodputOf(got telemetry, run string) (record, bool) {
	for _, rec := range got.GoodputRecords {
		if rec.resource()["nemo.run.id"] == run && rec.attributes()["nemo.goodput.final"] == true {
			return rec, true
		}
	}
	return nil, false
}

// waitFinalGoodput waits for run's final nemo.run.goodput record in dir.
func waitFinalGoodput(t *testing.T, dir, run string) record {
	t.Helper()
	var final record
	waitFor(t, deliveryTimeout, "the final nemo.run.goodput record of "+run, func() bool {
		var ok bool
		final, ok = finalGoodputOf(readTelemetry(t, dir), run)
		return ok
	})
	return final
}

// checkAccount compares a final goodput record's attributes with the
// emulator's account of the run.
func checkAccount(t *testing.T, attrs map[string]any, truth lensemu.Truth) {
	t.Helper()
	wall := number(t, attrs["nemo.run.wall_seconds"])
	if math.Abs(wall-truth.Wall.Seconds()) > 0.001 {
		t.Errorf("wall time %.3f s, the emulator's %.3f s", wall, truth.Wall.Seconds())
	}
	var sum float64
	for category, want := range truth.Categories() {
		got := number(t, attrs["nemo.time."+category])
		sum += got
		if math.Abs(got-want.Seconds()) > 0.01*truth.Wall.Seconds() {
			t.Errorf("%s: %.3f s, the emulator's %.3f s (more than 1%% of the %.1f s wall time apart)", category, got, want.Seconds(), truth.Wall.Seconds())
		}
	}
	if math.Abs(sum-wall) > 0.01 {
		t.Errorf("the categories add up to %.3f s, the wall time is %.3f s", sum, wall)
	}
	if got, want := number(t, attrs["nemo.goodput"]), truth.Productive.Seconds()/truth.Wall.Seconds(); math.Abs(got-want) > 0.001 {
		t.Errorf("goodput %.4f, the emulator's %.4f", got, want)
	}
	if n := number(t, attrs["nemo.run.attempts"]); n != 2 {
		t.Errorf("%v attempts, want 2", n)
	}
}

// number is a JSON number (or a bool/absent, which fails the test) as a float.
func number(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", v, err))
	}
	return f
}
