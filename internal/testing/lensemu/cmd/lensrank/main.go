// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Command lensrank is one emulated NeMo Lens training rank, started by srun
// in a SLURM job step. It reads its identity from the environment the way
// NeMo Lens does (RANK/SLURM_PROCID, WORLD_SIZE/SLURM_NTASKS,
// LOCAL_RANK/SLURM_LOCALID; run id from NEMO_LENS_RUN_ID, MEGATRON_OTEL_RUN_ID
// or SLURM_JOB_ID; slurm.* resource attributes; OTEL_RESOURCE_ATTRIBUTES),
// sends Megatron-shaped telemetry with lensemu to OTEL_EXPORTER_OTLP_ENDPOINT
// and writes what the collector acknowledged to
// <out>/<SLURM_JOB_ID>/<SLURM_RESTART_COUNT>/rank-<rank>.json: after every
// segment (a lensemu run of -steps iterations) and when it ends, also when
// SIGTERM (scancel, job end, requeue) stops it mid-run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
)

// segmentTimeout bounds one segment, so that a rank stopped while the
// collector goes away still reports before SLURM's KillWait ends.
const segmentTimeout = 15 * time.Second

// report is what one rank writes: its identity and what was acknowledged.
type report struct {
	JobID        string
	RestartCount int
	RunID        string
	Rank         int
	LocalRank    int
	WorldSize    int
	Segments     int // segments completed
	Done         bool
	Acknowledged lensemu.Result
	Errors       []string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lensrank:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory for the per-rank reports (required)")
	segments := flag.Int("segments", 1, "segments to run")
	steps := flag.Int("steps", 3, "training iterations per segment")
	pause := flag.Duration("pause", 0, "pause between segments")
	barrier := flag.String("barrier", "", "train in real time, synchronously with the job's other ranks: "+
		"each step's all-reduce is a barrier of files under this directory, shared by every node (see barrier.go)")
	compute := flag.Duration("compute", 0, "compute time of a step (megatron.forward_backward); default lensemu's")
	slowRank := flag.Int("slow-rank", -1, "the rank that computes -slow-factor times longer on -slow-iteration")
	slowIteration := flag.Int("slow-iteration", 0, "the iteration of -slow-rank's slow step")
	slowFactor := flag.Float64("slow-factor", 3, "how many times longer -slow-rank computes on -slow-iteration")
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}
	if (*compute != 0 || *slowRank >= 0) && *barrier == "" {
		return errors.New("-compute and -slow-rank need -barrier: without it the ranks of one job do not wait for each other across processes")
	}
	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	r, err := rankFromEnv(stop)
	if err != nil {
		return err
	}
	r.Steps = *steps
	rep := report{JobID: os.Getenv("SLURM_JOB_ID"), RunID: r.RunID, Rank: r.Rank, LocalRank: r.LocalRank, WorldSize: r.WorldSize}
	if v := os.Getenv("SLURM_RESTART_COUNT"); v != "" {
		if rep.RestartCount, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("SLURM_RESTART_COUNT %q: %w", v, err)
		}
	}
	if *barrier != "" {
		b := fileBarrier{dir: filepath.Join(*barrier, rep.JobID, strconv.Itoa(rep.RestartCount)), rank: r.Rank, world: r.WorldSize, stop: stop}
		r.Barrier = b.wait
		r.ComputeDuration = computeTimes(r.Rank, *compute, *slowRank, *slowIteration, *slowFactor)
	}
	path := filepath.Join(*out, rep.JobID, strconv.Itoa(rep.RestartCount), fmt.Sprintf("rank-%d.json", r.Rank))
	for rep.Segments < *segments && stop.Err() == nil {
		// A segment started is finished even after SIGTERM: it is the flush
		// a rank does on its way out, and it counts only what is acknowledged.
		ctx, done := segmentContext(stop, *barrier != "")
		res, err := r.Run(ctx)
		done()
		rep.Acknowledged = rep.Acknowledged.Add(res)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		rep.Segments++
		if err := writeReport(path, rep); err != nil {
			return err
		}
		select {
		case <-stop.Done():
		case <-time.After(*pause):
		}
	}
	// A rank stopped (SIGTERM) in its last segment did not finish it.
	rep.Done = rep.Segments == *segments && stop.Err() == nil
	if err := writeReport(path, rep); err != nil {
		return err
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("rank %d: %d export errors, first: %s", r.Rank, len(rep.Errors), rep.Errors[0])
	}
	return nil
}

// segmentContext bounds one segment: by segmentTimeout, or, for a rank in
// real time (-barrier), which may block in its all-reduce for as long as a
// peer is gone, by segmentTimeout after SIGTERM.
func segmentContext(stop context.Context, realTime bool) (context.Context, context.CancelFunc) {
	if !realTime {
		return context.WithTimeout(context.Background(), segmentTimeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopTimer := context.AfterFunc(stop, func() { time.AfterFunc(segmentTimeout, cancel) })
	return ctx, func() { stopTimer(); cancel() }
}

// computeTimes is a rank's compute time per iteration: compute (lensemu's
// default when 0), factor times that for slowRank on slowIteration.
func computeTimes(rank int, compute time.Duration, slowRank, slowIteration int, factor float64) func(int) time.Duration {
	if compute == 0 {
		compute = lensemu.DefaultComputeDuration
	}
	return func(it int) time.Duration {
		if rank == slowRank && it == slowIteration {
			return time.Duration(float64(compute) * factor)
		}
		return compute
	}
}

// rankFromEnv builds the rank from the launcher's environment.
func rankFromEnv(ctx context.Context) (lensemu.Rank, error) {
	var r lensemu.Rank
	var err error
	if r.Rank, err = intEnv("RANK", "SLURM_PROCID"); err != nil {
		return r, err
	}
	if r.WorldSize, err = intEnv("WORLD_SIZE", "SLURM_NTASKS"); err != nil {
		return r, err
	}
	if r.LocalRank, err = intEnv("LOCAL_RANK", "SLURM_LOCALID"); err != nil {
		return r, err
	}
	r.RunID = firstEnv("NEMO_LENS_RUN_ID", "MEGATRON_OTEL_RUN_ID", "SLURM_JOB_ID")
	if r.Endpoint, r.Protocol, err = endpointFromEnv(); err != nil {
		return r, err
	}
	// The SDK's own parser for OTEL_RESOURCE_ATTRIBUTES (percent-decoded).
	fromEnv, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return r, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	host, _ := os.Hostname()
	r.Resource = append(slurmAttributes(), attribute.String(attrkey.HostName, host))
	r.Resource = append(r.Resource, fromEnv.Attributes()...)
	return r, nil
}

// slurmAttributes are the slurm.* resource attributes NeMo Lens sets, as
// strings, for the variables SLURM set.
func slurmAttributes() []attribute.KeyValue {
	var attrs []attribute.KeyValue
	for _, kv := range [][2]string{
		{"slurm.job.id", "SLURM_JOB_ID"},
		{"slurm.job.name", "SLURM_JOB_NAME"},
		{"slurm.nodelist", "SLURM_JOB_NODELIST"},
		{"slurm.nnodes", "SLURM_JOB_NUM_NODES"},
		{"slurm.ntasks", "SLURM_NTASKS"},
		{"slurm.partition", "SLURM_JOB_PARTITION"},
		{"slurm.cluster.name", "SLURM_CLUSTER_NAME"},
	} {
		if v := os.Getenv(kv[1]); v != "" {
			attrs = append(attrs, attribute.String(kv[0], v))
		}
	}
	return attrs
}

// endpointFromEnv reads OTEL_EXPORTER_OTLP_ENDPOINT (a URL such as
// http://localhost:4317) and OTEL_EXPORTER_OTLP_PROTOCOL (grpc by default).
func endpointFromEnv() (endpoint, protocol string, err error) {
	raw := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if raw == "" {
		return "", "", errors.New("OTEL_EXPORTER_OTLP_ENDPOINT is not set")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q is not a URL like http://localhost:4317", raw)
	}
	switch p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p {
	case "", lensemu.GRPC:
		return u.Host, lensemu.GRPC, nil
	case lensemu.HTTP:
		return u.Host, lensemu.HTTP, nil
	default:
		return "", "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: use %s or %s", p, lensemu.GRPC, lensemu.HTTP)
	}
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

func intEnv(names ...string) (int, error) {
	v := firstEnv(names...)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%v: want a non-negative integer, got %q", names, v)
	}
	return n, nil
}

// writeReport replaces the report atomically, so that a reader (or a rank
// killed mid-write) never leaves a torn file.
func writeReport(path string, rep report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	// The report holds span counts, nothing secret, and the e2e test that
	// reads it need not run as the user SLURM runs the rank as.
	if err := os.WriteFile(tmp, b, 0o644); err != nil { //nolint:gosec // G306: see above
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
