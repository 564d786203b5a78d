// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package testcollector runs the otelcol-nemo binary built by `make build`
// for end-to-end tests and benchmarks: it starts it with a preset from
// configs/ on free loopback ports, waits for health_check, scrapes its own
// metrics, and stops it with SIGTERM. The same process handling (Process)
// runs the tests' real peers, and BuildTool builds their helper programs.
// Without the binary the tests that need it are skipped, or failed when
// $OTELCOL_NEMO_REQUIRE_BINARY is set (as `make test` does).
//
// Presets take their listen address and ports from environment variables
// (OTELCOL_LISTEN_HOST, OTLP_GRPC_PORT, ...), so the harness runs the preset
// files exactly as committed, only with other values for those variables.
package testcollector // import "github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeouts for start and stop.
const (
	StartTimeout = 60 * time.Second
	StopTimeout  = 30 * time.Second
)

// RepoRoot returns the repository root (the directory holding the root
// module's go.mod and builder-config.yaml), found by walking up from the working directory.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "builder-config.yaml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("repository root (builder-config.yaml) not found above the working directory")
		}
		dir = parent
	}
}

// RequireBinaryEnv names the environment variable that turns a missing
// binary from a skip into a failure. `make test` sets it: there the binary
// was just built, so its absence is a defect, while a plain `go test ./...`
// on a fresh clone has not built it.
const RequireBinaryEnv = "OTELCOL_NEMO_REQUIRE_BINARY"

// Binary returns the path of the collector binary: $OTELCOL_NEMO_BIN, or
// _build/otelcol-nemo in the repository.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("OTELCOL_NEMO_BIN")
	if bin == "" {
		bin = filepath.Join(RepoRoot(tb), "_build", "otelcol-nemo")
	}
	RequireFile(tb, bin, "collector binary", "make build")
	return bin
}

// RequireFile checks that a prebuilt file the test needs exists: without
// it the test is skipped, with a message naming the make target that builds
// it, or failed when $OTELCOL_NEMO_REQUIRE_BINARY is set.
func RequireFile(tb testing.TB, path, what, target string) {
	tb.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	msg := fmt.Sprintf("%s %s not found: run %#q first (`make test` builds it)", what, path, target)
	if os.Getenv(RequireBinaryEnv) != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// BuildTool compiles the main package in dir, a directory relative to the
// repository root (e.g. "bench/loadgen"), into a temporary directory and
// returns the binary's path. The build runs in dir, so it uses the go.mod of
// the module that holds dir: the repository has several (the root, e2e/,
// bench/). The timeout only guards against a hung build.
func BuildTool(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), filepath.Base(dir))
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, GoTool(), "build", "-o", bin, ".") //nolint:gosec // G204: the go tool building a directory fixed by the calling test, not external input
	cmd.Dir = filepath.Join(RepoRoot(tb), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// GoTool is the go command on PATH, or the one of the toolchain that built
// the test when PATH has none.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// A test binary runs on the machine that built it, so the build-time
	// GOROOT is meaningful here (the reason runtime.GOROOT is deprecated does
	// not apply); `go test` normally puts $GOROOT/bin on PATH anyway.
	return filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: test binaries run where they were built, so the build-time GOROOT is valid
}

// Config returns the path of a preset in configs/.
func Config(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "configs", name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("preset %s: %v", name, err)
	}
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that was free when asked and
// that no earlier call of this test process returned: the kernel hands a
// port just closed out again, and two ports asked for one peer in a row
// (Jaeger's OTLP receiver and its query server) once came back equal.
func FreePort(tb testing.TB) int {
	tb.Helper()
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
	tb.Fatalf("find a free port: 1,000 tries gave ports this test process used already (%d of them)", len(given))
	return 0
}

// given are the ports FreePort returned.
var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)

// Collector is one running otelcol-nemo process.
type Collector struct {
	t       testing.TB
	proc    *Process
	stopped bool
	mu      sync.Mutex

	// Ports the collector listens on, all on 127.0.0.1 (ViewPort: the
	// run pages of the presets with step metrics).
	GRPCPort, HTTPPort, HealthPort, MetricsPort, ViewPort int
	// Env is the environment given to the process (only the variables set
	// here, on top of the test process's own environment).
	Env map[string]string
}

// GRPCEndpoint is the OTLP/gRPC address, host:port.
func (c *Collector) GRPCEndpoint() string { return "127.0.0.1:" + strconv.Itoa(c.GRPCPort) }

// HTTPEndpoint is the OTLP/HTTP address, host:port.
func (c *Collector) HTTPEndpoint() string { return "127.0.0.1:" + strconv.Itoa(c.HTTPPort) }

// Options for Start.
type Options struct {
	// Env adds or overrides environment variables of the collector process.
	Env map[string]string
	// Args are extra command-line arguments (e.g. --feature-gates=...).
	Args []string
	// NoWait skips waiting for health_check (for configs without it).
	NoWait bool
}

// Start runs the binary with config on free ports and waits until
// health_check reports it ready. The collector is stopped (and the test failed
// if it does not stop cleanly) when the test ends, unless Stop or Kill was
// called before. A port found free can be taken by another process before the
// collector binds it (tests of several packages run at once): Start then
// tries again with new ports, a few times.
func Start(tb testing.TB, config string, opts Options) *Collector {
	tb.Helper()
	const attempts = 3
	for i := 1; ; i++ {
		c, err := start(tb, config, opts)
		if err == nil {
			return c
		}
		if i == attempts || !strings.Contains(c.Logs(), "address already in use") {
			tb.Fatalf("%v; its log:\n%s", err, c.Logs())
		}
		tb.Logf("attempt %d: a port was taken before the collector bound it; retrying with new ports", i)
	}
}

func start(tb testing.TB, config string, opts Options) (*Collector, error) {
	tb.Helper()
	c := &Collector{
		t:           tb,
		GRPCPort:    FreePort(tb),
		HTTPPort:    FreePort(tb),
		HealthPort:  FreePort(tb),
		MetricsPort: FreePort(tb),
		ViewPort:    FreePort(tb),
	}
	c.Env = map[string]string{
		"OTELCOL_LISTEN_HOST":  "127.0.0.1",
		"OTLP_GRPC_PORT":       strconv.Itoa(c.GRPCPort),
		"OTLP_HTTP_PORT":       strconv.Itoa(c.HTTPPort),
		"HEALTH_CHECK_PORT":    strconv.Itoa(c.HealthPort),
		"OTELCOL_METRICS_PORT": strconv.Itoa(c.MetricsPort),
		"NEMO_VIEW_PORT":       strconv.Itoa(c.ViewPort),
	}
	maps.Copy(c.Env, opts.Env)
	// Ports given in opts.Env (a collector started again on its ports) win.
	for name, port := range map[string]*int{"OTLP_GRPC_PORT": &c.GRPCPort, "OTLP_HTTP_PORT": &c.HTTPPort, "HEALTH_CHECK_PORT": &c.HealthPort, "OTELCOL_METRICS_PORT": &c.MetricsPort, "NEMO_VIEW_PORT": &c.ViewPort} {
		if v, err := strconv.Atoi(c.Env[name]); err == nil {
			*port = v
		}
	}
	c.proc = StartProcess(tb, "collector", Binary(tb), append([]string{"--config=" + config}, opts.Args...), c.Env)
	if !opts.NoWait {
		if err := c.waitHealthy(); err != nil {
			c.Kill()
			return c, err
		}
	}
	tb.Cleanup(func() {
		c.mu.Lock()
		stopped := c.stopped
		c.mu.Unlock()
		if !stopped {
			c.Stop()
		}
	})
	return c, nil
}

func (c *Collector) waitHealthy() error {
	url := fmt.Sprintf("http://127.0.0.1:%d/", c.HealthPort)
	switch err := c.proc.WaitForOK(url, StartTimeout); {
	case errors.Is(err, ErrExited):
		exitErr := c.proc.Err()
		if exitErr == nil {
			// A clean exit: %w would print a nil error as "%!w(<nil>)".
			return errors.New("collector exited during start-up (<nil>)")
		}
		return fmt.Errorf("collector exited during start-up (%w)", exitErr)
	case err != nil:
		return fmt.Errorf("collector not healthy on %s after %s", url, StartTimeout)
	}
	return nil
}

// Logs returns everything the collector wrote to stdout and stderr so far.
func (c *Collector) Logs() string { return c.proc.Logs() }

// Stop sends SIGTERM and waits for a clean exit. It fails the test when the
// collector does not exit within StopTimeout or exits with an error.
func (c *Collector) Stop() {
	c.t.Helper()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	if !c.proc.Terminate(StopTimeout) {
		c.t.Errorf("collector did not shut down within %s of SIGTERM; its log:\n%s", StopTimeout, c.Logs())
		return
	}
	if err := c.proc.Err(); err != nil {
		c.t.Errorf("collector exited with %v; its log:\n%s", err, c.Logs())
	}
}

// Kill ends the collector with SIGKILL, as a crash would.
func (c *Collector) Kill() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.proc.Kill()
}

// Pid is the collector's process id.
func (c *Collector) Pid() int { return c.proc.Pid() }

// Metric scrapes the collector's own Prometheus endpoint and returns the sum
// of every series of the named metric whose labels include all of labels
// (given as "key=value" strings), and whether any series matched.
func (c *Collector) Metric(name string, labels ...string) (float64, bool, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.MetricsPort))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	sum, found := SumMetric(body, name, labels...)
	return sum, found, nil
}

// SumMetric sums the samples of the named metric in a Prometheus text
// exposition whose labels include all of labels ("key=value").
func SumMetric(exposition []byte, name string, labels ...string) (float64, bool) {
	var (
		sum   float64
		found bool
	)
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metricName, labelText, _ := strings.Cut(series, "{")
		if metricName != name {
			continue
		}
		match := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !strings.Contains(labelText, k+`="`+v+`"`) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		if sp := strings.IndexByte(value, ' '); sp >= 0 {
			value = value[:sp]
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		sum += f
		found = true
	}
	return sum, found
}

// WaitForMetric polls Metric until cond holds for its value or timeout passes.
func (c *Collector) WaitForMetric(timeout time.Duration, cond func(float64) bool, name string, labels ...string) (float64, error) {
	deadline := time.Now().Add(timeout)
	var (
		last float64
		err  error
	)
	for time.Now().Before(deadline) {
		var found bool
		last, found, err = c.Metric(name, labels...)
		if err == nil && found && cond(last) {
			return last, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil {
		err = errors.New("condition not met")
	}
	return last, fmt.Errorf("metric %s%v: last value %v after %s: %w", name, labels, last, timeout, err)
}

// Run runs the binary with args (e.g. "validate", "--config=...") and env,
// and returns its combined output and error.
func Run(tb testing.TB, env map[string]string, args ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command(Binary(tb), args...) //nolint:gosec // G204: runs the collector binary under test with arguments the test chose
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	done := make(chan struct{})
	var (
		out []byte
		err error
	)
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(StartTimeout):
		_ = cmd.Process.Kill()
		<-done
		return string(out), fmt.Errorf("%v did not finish within %s", args, StartTimeout)
	}
	return string(out), err
}
