// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The tests that run the image on a Docker daemon. They need the image and
// run only under docker/test.sh (`make docker-test`), which sets
// NEMO_DOCKER_TEST=1; the checks of the files alone are in compose_test.go.

func requireDocker(t *testing.T) {
	t.Helper()
	if os.Getenv("NEMO_DOCKER_TEST") != "1" {
		t.Skip("needs a Docker daemon and the otelcol-nemo image: run `make docker-test` (docker/test.sh sets NEMO_DOCKER_TEST=1)")
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// docker runs the docker CLI (bounded in time) and returns its combined output.
func docker(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) //nolint:usetesting // t.Context() is canceled before Cleanup runs, and docker is called from t.Cleanup
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Dir = testcollector.RepoRoot(t)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func mustDocker(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := docker(t, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// lensJob returns the ranks of one emulated NeMo Lens job sending to the given
// OTLP addresses: half over gRPC, half over http/protobuf, with both rank-key
// spellings and both attribute types (as mixedJob does for a local collector).
func lensJob(grpcAddr, httpAddr, runID string, worldSize, steps int) []lensemu.Rank {
	ranks := make([]lensemu.Rank, worldSize)
	for i := range ranks {
		ranks[i] = lensemu.Rank{
			Endpoint: grpcAddr, Protocol: lensemu.GRPC,
			RunID: runID, Rank: i, WorldSize: worldSize, LocalRank: i % 8,
			LegacyKeys: i%4 >= 2, RankAsString: i%3 == 0, Steps: steps,
			Resource: []attribute.KeyValue{attribute.String("slurm.job.id", "4242")},
		}
		if i%2 == 1 {
			ranks[i].Endpoint, ranks[i].Protocol = httpAddr, lensemu.HTTP
		}
	}
	return ranks
}

// dockerJobTimeout bounds one emulated job sent to a container. It is longer
// than jobTimeout: each emulated rank sets up a large SDK log queue, which
// takes tens of seconds on a loaded two-core machine.
const dockerJobTimeout = 5 * time.Minute

// sendJob runs the ranks and returns the total the collector acknowledged,
// failing the test on any export error or on a rank that sent nothing of a
// signal.
func sendJob(t *testing.T, ranks []lensemu.Rank) lensemu.Result {
	t.Helper()
	return lensemu.Sum(runJobWithin(t, ranks, dockerJobTimeout))
}

// containerEnv is testEnv without the output directories: the test values of
// the variables presets require (and the all_ranks strategy, so that every
// acknowledged item is expected in the output), for a container whose
// directories are the image's own.
func containerEnv(t *testing.T) map[string]string {
	env := testEnv(t)
	delete(env, "NEMO_TELEMETRY_DIR")
	delete(env, "NEMO_QUEUE_DIR")
	return env
}

// waitHealthy waits until the container's HEALTHCHECK reports healthy.
func waitHealthy(t *testing.T, container string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		state := mustDocker(t, nil, "inspect", "--format", "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", container)
		switch {
		case state == "running healthy":
			return
		case strings.HasSuffix(state, " none"):
			t.Fatalf("container %s has no health check (state %q)", container, state)
		case !strings.HasPrefix(state, "running"):
			t.Fatalf("container %s is %q:\n%s", container, state, containerLogs(t, container))
		case time.Now().After(deadline):
			t.Fatalf("container %s not healthy after 90s (%q):\n%s", container, state, containerLogs(t, container))
		}
		time.Sleep(time.Second)
	}
}

func containerLogs(t *testing.T, container string) string {
	out, _ := docker(t, nil, "logs", "--tail", "50", container)
	return out
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// checkOutput reads the file preset's output in dir and compares it with what
// the collector acknowledged: every line a complete JSON record, every item
// found, every rank present, every file and directory written by the image's
// user.
func checkOutput(t *testing.T, dir string, sent lensemu.Result, worldSize int) {
	t.Helper()
	files := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != imageUID || st.Gid != imageUID {
			t.Errorf("%s is owned by %v, want uid/gid %d (the image's non-root user)", path, fi.Sys(), imageUID)
		}
		if !d.IsDir() {
			files[plainName(filepath.Base(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("output: %v", err)
	}
	for _, f := range []string{"traces.jsonl", "metrics.jsonl", "logs.jsonl"} {
		if !files[f] {
			t.Errorf("no %s under %s (found %v)", f, dir, files)
		}
	}
	got := readTelemetry(t, dir) // fails on any line that is not a complete request
	if got.Result != sent {
		t.Fatalf("acknowledged %s, found %s in the files", describe(sent), describe(got.Result))
	}
	for rank := range worldSize {
		if got.ByRank[int64(rank)].Spans == 0 {
			t.Errorf("no span from rank %d in the output", rank)
		}
	}
	t.Logf("found every acknowledged item in %s: %s", dir, describe(got.Result))
}

// TestDockerImage checks the built image: its metadata; every preset validates
// inside it (and a missing required variable is named); the default preset in
// a container with ports published on 127.0.0.1 and a host directory at /data
// turns healthy, takes a NeMo Lens job from the host, and on `docker stop`
// leaves complete JSONL written by uid 10001.
func TestDockerImage(t *testing.T) {
	requireDocker(t)
	image := envOr("NEMO_DOCKER_IMAGE", "otelcol-nemo:local")
	label := envOr("NEMO_DOCKER_LABEL", "org.nemo-lens.docker-test=go-test")

	t.Run("metadata", func(t *testing.T) {
		var cfg struct {
			User         string
			ExposedPorts map[string]struct{}
			Env          []string
			Entrypoint   []string
			Cmd          []string
			Volumes      map[string]struct{}
			Healthcheck  struct{ Test []string }
		}
		if err := json.Unmarshal([]byte(mustDocker(t, nil, "image", "inspect", "--format", "{{json .Config}}", image)), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.User != "10001:10001" {
			t.Errorf("USER %q, want 10001:10001", cfg.User)
		}
		for _, p := range []string{"4317/tcp", "4318/tcp", "13133/tcp", "8888/tcp", "8889/tcp", "8890/tcp"} {
			if _, ok := cfg.ExposedPorts[p]; !ok {
				t.Errorf("port %s not exposed", p)
			}
		}
		for _, e := range []string{"OTELCOL_LISTEN_HOST=0.0.0.0", "NEMO_TELEMETRY_DIR=/data/telemetry", "NEMO_QUEUE_DIR=/data/queue"} {
			if !slices.Contains(cfg.Env, e) {
				t.Errorf("ENV %s missing: %v", e, cfg.Env)
			}
		}
		if !slices.Equal(cfg.Entrypoint, []string{"/otelcol-nemo"}) || !slices.Equal(cfg.Cmd, []string{"--config=/etc/otel/collector.yaml"}) {
			t.Errorf("ENTRYPOINT %q CMD %q", cfg.Entrypoint, cfg.Cmd)
		}
		if _, ok := cfg.Volumes["/data"]; !ok {
			t.Errorf("no VOLUME /data: %v", cfg.Volumes)
		}
		if !slices.Equal(cfg.Healthcheck.Test, []string{"CMD", "/healthcheck"}) {
			t.Errorf("HEALTHCHECK %q, want [CMD /healthcheck]", cfg.Healthcheck.Test)
		}
	})

	t.Run("presets validate in the image", func(t *testing.T) {
		presets, _ := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "*.yaml"))
		paths := []string{presetDir + "collector.yaml"}
		for _, p := range presets {
			// Both names: ours and the NeMo Lens docs' collector-<preset>.yaml.
			paths = append(paths, presetDir+filepath.Base(p), presetDir+"collector-"+filepath.Base(p))
		}
		var envArgs []string
		for k, v := range containerEnv(t) {
			envArgs = append(envArgs, "--env", k+"="+v)
		}
		for _, path := range paths {
			args := append([]string{"run", "--rm", "--label", label}, envArgs...)
			args = append(args, image, "validate", "--config="+path)
			if _, err := docker(t, nil, args...); err != nil {
				t.Errorf("validate %s in the image: %v", path, err)
			}
		}
		out, err := docker(t, nil, "run", "--rm", "--label", label, image, "validate", "--config="+presetDir+"honeycomb.yaml")
		if err == nil || !strings.Contains(out, "HONEYCOMB_API_KEY") {
			t.Errorf("honeycomb.yaml without HONEYCOMB_API_KEY: want a failure naming the variable, got err=%v:\n%s", err, out)
		}
	})

	t.Run("default preset receives a job and writes JSONL as uid 10001", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("needs root to give the mounted /data directory to uid 10001 (docker/test.sh runs as root)")
		}
		data := t.TempDir()
		for _, d := range []string{data, filepath.Join(data, "telemetry")} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, imageUID, imageUID); err != nil {
				t.Fatal(err)
			}
		}
		grpcPort, httpPort, healthPort := testcollector.FreePort(t), testcollector.FreePort(t), testcollector.FreePort(t)
		name := fmt.Sprintf("nemo-docker-test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
		args := []string{
			"run", "--detach", "--name", name, "--label", label,
			"--publish", fmt.Sprintf("127.0.0.1:%d:4317", grpcPort),
			"--publish", fmt.Sprintf("127.0.0.1:%d:4318", httpPort),
			"--publish", fmt.Sprintf("127.0.0.1:%d:13133", healthPort),
			"--volume", data + ":/data",
		}
		for k, v := range containerEnv(t) {
			args = append(args, "--env", k+"="+v)
		}
		mustDocker(t, nil, append(args, image)...) // the default CMD: --config=/etc/otel/collector.yaml
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("container logs:\n%s", containerLogs(t, name))
			}
			if _, err := docker(t, nil, "rm", "--force", "--volumes", name); err != nil {
				t.Errorf("remove container: %v", err)
			}
		})

		waitHealthy(t, name)
		if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/", healthPort)); code != http.StatusOK {
			t.Fatalf("health_check through the published port: status %d", code)
		}
		const world = 4 // gRPC and HTTP, both rank-key spellings, int and string ranks
		sent := sendJob(t, lensJob(fmt.Sprintf("127.0.0.1:%d", grpcPort), fmt.Sprintf("127.0.0.1:%d", httpPort), "docker-run", world, 4))
		t.Logf("acknowledged by the container: %s", describe(sent))

		mustDocker(t, nil, "stop", "--time", "30", name)
		if code := mustDocker(t, nil, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
			t.Fatalf("collector exited with %s on SIGTERM:\n%s", code, containerLogs(t, name))
		}
		checkOutput(t, filepath.Join(data, "telemetry"), sent, world)
	})

	t.Run("the NeMo Lens page's minimal config runs as the page shows it", func(t *testing.T) {
		// The page's `docker run`: its otel-collector.yaml mounted at
		// /etc/otel-collector.yaml, its stock file exporter writing
		// /var/log/otel/telemetry.jsonl, its Jaeger (jaeger:4317) absent.
		cfg := filepath.Join(t.TempDir(), "otel-collector.yaml")
		if err := os.WriteFile(cfg, []byte(seedMinimalCollector), 0o644); err != nil { //nolint:gosec // read by the container's uid 10001
			t.Fatal(err)
		}
		grpcPort, httpPort := testcollector.FreePort(t), testcollector.FreePort(t)
		name := fmt.Sprintf("nemo-docker-page-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
		mustDocker(t, nil, "run", "--detach", "--name", name, "--label", label,
			"--publish", fmt.Sprintf("127.0.0.1:%d:4317", grpcPort),
			"--publish", fmt.Sprintf("127.0.0.1:%d:4318", httpPort),
			"--volume", cfg+":/etc/otel-collector.yaml:ro",
			image, "--config=/etc/otel-collector.yaml")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("container logs:\n%s", containerLogs(t, name))
			}
			if _, err := docker(t, nil, "rm", "--force", "--volumes", name); err != nil {
				t.Errorf("remove container: %v", err)
			}
		})
		// No health_check in the page's config: its ready line says it started.
		waitFor(t, 90*time.Second, "the collector's ready line", func() bool {
			return strings.Contains(containerLogs(t, name), "Everything is ready")
		})
		ranks := lensJob(fmt.Sprintf("127.0.0.1:%d", grpcPort), fmt.Sprintf("127.0.0.1:%d", httpPort), "docker-page", 2, 3)
		for i := range ranks {
			ranks[i].NoLogs = true // the page's config has no logs pipeline
		}
		sent := sendJob(t, ranks)
		mustDocker(t, nil, "stop", "--time", "30", name)
		if code := mustDocker(t, nil, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
			t.Fatalf("collector exited with %s on SIGTERM:\n%s", code, containerLogs(t, name))
		}
		out := filepath.Join(t.TempDir(), "telemetry.jsonl")
		mustDocker(t, nil, "cp", name+":/var/log/otel/telemetry.jsonl", out)
		if got := stockFileSpans(t, out); int64(got) != sent.Spans {
			t.Errorf("/var/log/otel/telemetry.jsonl holds %d spans, %d acknowledged", got, sent.Spans)
		}
	})
}

// stockFileSpans counts the spans in a stock `file` exporter's output: one
// OTLP/JSON export request per line.
func stockFileSpans(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spans int
	var u ptrace.JSONUnmarshaler
	for line := range strings.Lines(string(data)) {
		td, err := u.UnmarshalTraces([]byte(line))
		if err != nil {
			t.Fatalf("%s: a line is not OTLP/JSON traces: %v", path, err)
		}
		spans += td.SpanCount()
	}
	return spans
}

// TestDockerCompose runs the collector service of docker-compose.otel.yml
// alone (no other image is pulled or started), on free host ports (the
// container's own ports stay the image's, which docker/prometheus.yml
// scrapes): it turns healthy, serves its metrics, writes a job to the named
// volume as uid 10001, and `down -v` removes its container, network and
// volume.
func TestDockerCompose(t *testing.T) {
	requireDocker(t)
	project := envOr("NEMO_COMPOSE_PROJECT", fmt.Sprintf("nemo-docker-test-%d", os.Getpid()))
	grpcPort, httpPort := testcollector.FreePort(t), testcollector.FreePort(t)
	healthPort, metricsPort := testcollector.FreePort(t), testcollector.FreePort(t)
	promPort, viewPort := testcollector.FreePort(t), testcollector.FreePort(t)
	env := []string{
		"OTLP_GRPC_PORT=" + strconv.Itoa(grpcPort), "OTLP_HTTP_PORT=" + strconv.Itoa(httpPort),
		"HEALTH_CHECK_PORT=" + strconv.Itoa(healthPort), "OTELCOL_METRICS_PORT=" + strconv.Itoa(metricsPort),
		"PROMETHEUS_EXPORTER_PORT=" + strconv.Itoa(promPort), "NEMO_VIEW_PORT=" + strconv.Itoa(viewPort),
		"NEMO_PUBLISH_ADDR=127.0.0.1",
		// The one-line switch, to the file preset (its JSONL is checked
		// below), through the link into the repository's mounted configs/.
		"OTELCOL_CONFIG=" + presetDir + "collector-file.yaml",
	}
	// The compose file as committed, plus an override that only adds the
	// test environment to the collector (as the other e2e tests run presets).
	var override strings.Builder
	override.WriteString("services:\n  collector:\n    environment:\n")
	cenv := containerEnv(t)
	for _, k := range slices.Sorted(maps.Keys(cenv)) {
		fmt.Fprintf(&override, "      %s: %q\n", k, cenv[k])
	}
	overridePath := filepath.Join(t.TempDir(), "compose.test-env.yml")
	if err := os.WriteFile(overridePath, []byte(override.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	compose := func(args ...string) []string {
		return append([]string{
			"compose", "--project-name", project,
			"--file", "docker-compose.otel.yml", "--file", overridePath,
		}, args...)
	}
	projectLabel := "label=com.docker.compose.project=" + project
	down := func() error {
		_, err := docker(t, env, compose("down", "--volumes", "--remove-orphans", "--timeout", "30")...)
		return err
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := docker(t, env, compose("logs", "--no-color", "--tail", "50")...)
			t.Logf("compose logs:\n%s", out)
		}
		if err := down(); err != nil {
			t.Errorf("compose down: %v", err)
		}
	})

	mustDocker(t, env, compose("up", "--detach", "--no-deps", "--no-build", "--pull", "never",
		"--wait", "--wait-timeout", "90", "collector")...)

	containers := strings.Fields(mustDocker(t, nil, "ps", "--all", "--quiet", "--filter", projectLabel))
	if len(containers) != 1 {
		t.Fatalf("compose started %d containers, want only the collector", len(containers))
	}
	waitHealthy(t, containers[0])
	mounts := mustDocker(t, nil, "inspect", "--format", `{{range .Mounts}}{{.Source}}={{.Destination}}:{{.RW}} {{end}}`, containers[0])
	if want := filepath.Join(testcollector.RepoRoot(t), "configs") + "=" + presetDir + "configs:false"; !strings.Contains(mounts, want) {
		t.Errorf("collector mounts %s: want %s (the repository's presets, read-only)", mounts, want)
	}
	if cmd := mustDocker(t, nil, "inspect", "--format", "{{json .Config.Cmd}}", containers[0]); !strings.Contains(cmd, "collector-file.yaml") {
		t.Errorf("collector command %s: OTELCOL_CONFIG did not switch the preset", cmd)
	}
	// The variables moved the host ports only: each maps to the image's port.
	for container, host := range map[int]int{4317: grpcPort, 4318: httpPort, 13133: healthPort, 8888: metricsPort, 8889: promPort, 8890: viewPort} {
		if got, want := mustDocker(t, env, compose("port", "collector", strconv.Itoa(container))...), fmt.Sprintf("127.0.0.1:%d", host); got != want {
			t.Errorf("the collector's port %d is published on %q, want %s", container, got, want)
		}
	}
	if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/", healthPort)); code != http.StatusOK {
		t.Fatalf("health_check: status %d", code)
	}
	if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); code != http.StatusOK {
		t.Fatalf("own metrics: status %d", code)
	}
	if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/", viewPort)); code != http.StatusOK {
		t.Fatalf("run pages: status %d", code)
	}

	const world = 2 // one rank over gRPC, one over HTTP
	sent := sendJob(t, lensJob(fmt.Sprintf("127.0.0.1:%d", grpcPort), fmt.Sprintf("127.0.0.1:%d", httpPort), "docker-compose", world, 3))
	mustDocker(t, env, compose("stop", "--timeout", "30", "collector")...)
	if code := mustDocker(t, nil, "inspect", "--format", "{{.State.ExitCode}}", containers[0]); code != "0" {
		t.Fatalf("collector exited with %s on stop:\n%s", code, containerLogs(t, containers[0]))
	}
	volume := project + "_otel-data"
	mount := mustDocker(t, nil, "volume", "inspect", "--format", "{{.Mountpoint}}", volume)
	checkOutput(t, filepath.Join(mount, "telemetry"), sent, world)

	if err := down(); err != nil {
		t.Fatalf("compose down: %v", err)
	}
	for _, kind := range []string{"container", "volume", "network"} {
		args := []string{kind, "ls", "--quiet", "--filter", projectLabel}
		if kind == "container" {
			args = []string{"ps", "--all", "--quiet", "--filter", projectLabel}
		}
		if left := mustDocker(t, nil, args...); left != "" {
			t.Errorf("compose down left %ss behind: %s", kind, left)
		}
	}
}
