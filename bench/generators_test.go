// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// telemetrygenModule is the stock load generator, at the collector's release.
const telemetrygenModule = "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0"

// generatorResult compares load generators against the same ceiling collector.
type generatorResult struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	// Accepted is what the collector accepted (otelcol_receiver_accepted_spans).
	Accepted       float64 `json:"collector_accepted_spans"`
	Seconds        float64 `json:"seconds"`
	SpansPerSecond float64 `json:"accepted_spans_per_second"`
	// Claimed is what the generator says it sent; telemetrygen counts the
	// spans its SDK dropped too.
	Claimed                float64 `json:"spans_claimed"`
	CPUSeconds             float64 `json:"generator_cpu_seconds"`
	CPUPerMillion          float64 `json:"generator_cpu_seconds_per_million_spans"`
	CollectorCPUPerMillion float64 `json:"collector_cpu_seconds_per_million_spans"`
	CollectorAvgCores      float64 `json:"collector_avg_cores"`
	Error                  string  `json:"error,omitempty"`
}

// compareGenerators runs bench/loadgen and telemetrygen, each for length as
// fast as they go, against a fresh ceiling collector.
func compareGenerators(t *testing.T, root, loadgen string, length time.Duration) []generatorResult {
	config := filepath.Join(root, "bench/configs/ceiling.yaml")
	var out []generatorResult

	c := testcollector.Start(t, config, testcollector.Options{})
	lg := generatorResult{Name: "bench/loadgen", Command: fmt.Sprintf("loadgen -duration %s (8 ranks, gRPC, 4 connections, 8 in flight, 500 spans/request)", length)}
	measureGenerator(t, c, &lg, func() (float64, float64, float64, error) {
		rep, err := runLoadgen(t, loadgen, length+2*time.Minute, "-endpoint", c.GRPCEndpoint(), "-duration", length.String())
		return rep.ElapsedSeconds, float64(rep.ItemsAccepted), rep.CPUSeconds, err
	})
	c.Stop()
	out = append(out, lg)

	tg := generatorResult{Name: "telemetrygen v0.161.0", Command: fmt.Sprintf("telemetrygen traces --otlp-insecure --rate 0 --workers 2 --duration %s", length)}
	bin, err := installTelemetrygen(t)
	if err != nil {
		tg.Error = err.Error()
		t.Logf("telemetrygen: %v", err)
		return append(out, tg)
	}
	c = testcollector.Start(t, config, testcollector.Options{})
	measureGenerator(t, c, &tg, func() (float64, float64, float64, error) {
		return runTelemetrygen(bin, c.GRPCEndpoint(), length)
	})
	c.Stop()
	return append(out, tg)
}

// measureGenerator runs gen (which returns its elapsed seconds, the spans it
// claims, its CPU seconds) and fills r from the collector's own counts.
func measureGenerator(t *testing.T, c *testcollector.Collector, r *generatorResult, gen func() (float64, float64, float64, error)) {
	pid := c.Pid()
	acc0, _, err := collectorSpans(c)
	if err != nil {
		r.Error = err.Error()
		return
	}
	cpu0, _ := procstat.CPU(pid)
	start := time.Now()
	secs, claimed, cpu, genErr := gen()
	wall := time.Since(start).Seconds()
	cpuLoad, _ := procstat.CPU(pid)
	waitDrained(c, batchTimeout)
	cpu1, _ := procstat.CPU(pid)
	acc1, _, err := collectorSpans(c)
	if err != nil {
		r.Error = err.Error()
		return
	}
	if genErr != nil {
		r.Error = firstLine(genErr.Error())
		t.Logf("%s: %v", r.Name, genErr)
	}
	r.Accepted, r.Claimed, r.CPUSeconds, r.Seconds = acc1-acc0, claimed, cpu, secs
	if r.Seconds <= 0 {
		r.Seconds = wall
	}
	r.SpansPerSecond = r.Accepted / r.Seconds
	r.CollectorAvgCores = (cpuLoad - cpu0).Seconds() / wall
	if r.Accepted > 0 {
		r.CPUPerMillion = r.CPUSeconds / r.Accepted * 1e6
		r.CollectorCPUPerMillion = (cpu1 - cpu0).Seconds() / r.Accepted * 1e6
	}
}

// installTelemetrygen builds telemetrygen from the module cache (or the
// module proxy) into a temporary directory.
func installTelemetrygen(t *testing.T) (string, error) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcollector.GoTool(), "install", telemetrygenModule) //nolint:gosec // G204: the go tool installing a module pinned by a constant, no external input
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %w: %s", telemetrygenModule, err, firstLine(string(out)))
	}
	return filepath.Join(dir, "telemetrygen"), nil
}

var tracesGenerated = regexp.MustCompile(`traces generated.*"traces": (\d+)`)

// runTelemetrygen runs telemetrygen as bench/README.md describes
// and returns its elapsed seconds, the spans it claims (two per trace: a
// parent and one child) and its CPU seconds.
func runTelemetrygen(bin, endpoint string, length time.Duration) (float64, float64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), length+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "traces", "--otlp-insecure", "--otlp-endpoint", endpoint,
		"--rate", "0", "--workers", "2", "--duration", length.String())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(start).Seconds()
	var cpu float64
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	var traces float64
	for _, m := range tracesGenerated.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseFloat(m[1], 64)
		traces += n
	}
	if err != nil {
		return secs, 2 * traces, cpu, fmt.Errorf("telemetrygen: %w: %s", err, lastLines(string(out), 3))
	}
	return length.Seconds(), 2 * traces, cpu, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
