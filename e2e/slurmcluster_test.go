// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// The one-node SLURM cluster that e2e/slurm_test.go submits its jobs to:
// munged, slurmctld and slurmd from Debian's packages, every key, socket,
// state file, log and pid in a temp dir, stopped by pid when the test ends.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// requireSlurm skips the test when SLURM or munge is missing or the test does
// not run as root (the daemons need it), unless NEMO_REQUIRE_SLURM=1: then
// that is a failure (CI sets it, after installing the packages).
func requireSlurm(t *testing.T) {
	t.Helper()
	var reason string
	for _, name := range []string{"munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo"} {
		if _, err := sbinPath(name); err != nil {
			reason = fmt.Sprintf("%s is not installed (apt-get install slurm-wlm munge)", name)
			break
		}
	}
	if reason == "" && os.Geteuid() != 0 {
		reason = "the one-node SLURM cluster's daemons run as root; run the test as root"
	}
	if reason == "" {
		return
	}
	if os.Getenv("NEMO_REQUIRE_SLURM") == "1" {
		t.Fatalf("NEMO_REQUIRE_SLURM=1, but %s", reason)
	}
	t.Skipf("%s (NEMO_REQUIRE_SLURM=1 makes this a failure)", reason)
}

// sbinPath finds a command on PATH or in /usr/sbin (the daemons live there,
// and a non-login root shell may not have it on PATH).
func sbinPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// buildLensrank compiles the emulated rank into a temporary directory.
func buildLensrank(t *testing.T) string {
	t.Helper()
	return testcollector.BuildTool(t, "./internal/testing/lensemu/cmd/lensrank")
}

// slurmCluster is a one-node cluster whose state lives in dir.
type slurmCluster struct {
	dir, conf, host string
}

// startSlurmCluster starts munged, slurmctld and slurmd and waits until the
// node is idle. Each daemon is stopped by its pid when the test ends, after
// every job of the cluster has been cancelled and has left it.
func startSlurmCluster(t *testing.T) *slurmCluster {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	dir := t.TempDir()
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), host: host}
	// munged wants its socket's directory searchable by every user.
	for d, mode := range map[string]os.FileMode{"munge": 0o755, "state": 0o700, "spool": 0o700} {
		if err = os.Mkdir(filepath.Join(dir, d), mode); err != nil {
			t.Fatal(err)
		}
		if err = os.Chmod(filepath.Join(dir, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err = os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	munge := filepath.Join(dir, "munge")
	key := make([]byte, 1024)
	if _, err = rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err = os.WriteFile(filepath.Join(munge, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(munge, "munge.socket.2")
	c.startDaemon(t, "munged", filepath.Join(munge, "munged.log"), "--foreground", "--force",
		"--key-file="+filepath.Join(munge, "munge.key"), "--socket="+socket,
		"--pid-file="+filepath.Join(munge, "munged.pid"), "--log-file="+filepath.Join(munge, "munged.log"),
		"--seed-file="+filepath.Join(munge, "munged.seed"))
	waitFor(t, 15*time.Second, "munged's socket", func() bool { _, statErr := os.Stat(socket); return statErr == nil })

	firstJobID, err := rand.Int(rand.Reader, big.NewInt(500000))
	if err != nil {
		t.Fatal(err)
	}
	c.writeConf(t, map[string]any{
		"Host": host, "Dir": dir, "MungeSocket": socket, "CPUs": max(2, runtime.NumCPU()),
		"CtldPort": testcollector.FreePort(t), "SlurmdPort": testcollector.FreePort(t),
		"FirstJobID": 1000 + firstJobID.Int64(),
	})
	c.startDaemon(t, "slurmctld", filepath.Join(dir, "slurmctld.log"), "-D", "-f", c.conf)
	c.startDaemon(t, "slurmd", filepath.Join(dir, "slurmd.log"), "-D", "-f", c.conf, "-N", host)
	t.Cleanup(func() { c.cancelAllJobs(t) })
	waitFor(t, 2*time.Minute, "the node to be idle (sinfo)", func() bool {
		out, err := c.command("sinfo", "-h", "-o", "%T")
		return err == nil && strings.TrimSpace(out) == "idle"
	})
	return c
}

func (c *slurmCluster) writeConf(t *testing.T, values map[string]any) {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "slurm", "slurm.conf.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, values); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.conf, b.Bytes(), 0o644); err != nil { //nolint:gosec // G306: slurm.conf must be readable by the SLURM daemons and by every user's client commands
		t.Fatal(err)
	}
}

// startDaemon runs a daemon in the foreground; it is stopped by pid (SIGTERM,
// then SIGKILL after 15s) when the test ends, and its log is shown if the test
// failed.
func (c *slurmCluster) startDaemon(t *testing.T, name, logPath string, args ...string) {
	t.Helper()
	path, err := sbinPath(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(c.dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s (pid %d) log:\n%s\n%s", name, cmd.Process.Pid, tailFile(logPath, 4000), tailFile(out.Name(), 2000))
		}
	})
}

// cancelAllJobs cancels what is left in the cluster and waits until the jobs
// (and so their collectors and ranks) are gone, before the daemons stop.
func (c *slurmCluster) cancelAllJobs(t *testing.T) {
	_, _ = c.command("scancel", "--user=root")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if out, err := c.command("squeue", "-h", "-o", "%i"); err == nil && strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("jobs still in the cluster a minute after scancel")
}

// env is the environment of the daemons and commands: this cluster's config,
// and none of the settings the job template reads from the submitter.
func (c *slurmCluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "OTEL_"), strings.HasPrefix(k, "NEMO_"),
			strings.HasSuffix(k, "_PORT"), k == "OTELCOL_LISTEN_HOST", k == "OTELCOL_NEMO_BIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SLURM_CONF="+c.conf)
}

// command runs a SLURM client command, bounded in time.
func (c *slurmCluster) command(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sbatch submits a job with extra environment and returns its job id.
func (c *slurmCluster) sbatch(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	cmd.Env = c.env()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v\n%s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch printed %q, not a job id", out)
	}
	return id
}

// waitGone waits until the job (every task of an array) has left the queue.
func (c *slurmCluster) waitGone(t *testing.T, jobID string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "job "+jobID+" to end", func() bool {
		out, err := c.command("squeue", "-h", "-j", jobID, "-o", "%i")
		return err == nil && strings.TrimSpace(out) == ""
	})
}

var scontrolField = regexp.MustCompile(`(\w+)=(\S*)`)

// jobs returns scontrol's records of a job (one per array task).
func (c *slurmCluster) jobs(t *testing.T, jobID string) []map[string]string {
	t.Helper()
	out, err := c.command("scontrol", "-o", "show", "job", jobID)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v\n%s", jobID, err, out)
	}
	var records []map[string]string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		rec := map[string]string{}
		for _, m := range scontrolField.FindAllStringSubmatch(line, -1) {
			if _, seen := rec[m[1]]; !seen {
				rec[m[1]] = m[2]
			}
		}
		records = append(records, rec)
	}
	return records
}
