// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// The SLURM clusters that e2e/slurm_test.go and e2e/slurmnodes_test.go
// submit their jobs to: munged, slurmctld and slurmd from Debian's packages,
// every key, socket, state file, log and pid in a temp dir, stopped by pid
// when the test ends. The one-node cluster runs on this machine's loopback;
// the multi-node one has a host (a network namespace, e2e/netns_test.go) per
// slurmd and one for slurmctld, and runs the client commands there.

import (
	"bytes"
	"cmp"
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
	return testcollector.BuildTool(t, "internal/testing/lensemu/cmd/lensrank")
}

// slurmCluster is a cluster whose state lives in dir.
type slurmCluster struct {
	dir, conf, host string
	// lan, when set, holds the hosts: slurmctld and the client commands run
	// on host, each node's slurmd on its own.
	lan *lan
}

// slurmNode is a node of slurm.conf.
type slurmNode struct{ Name, Addr string }

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
	c := newSlurmCluster(t, host, nil)
	c.writeConf(t, map[string]any{
		"CtldHost": host, "CtldAddr": "127.0.0.1", "Nodes": []slurmNode{{host, "127.0.0.1"}},
		"CPUs": max(2, runtime.NumCPU()), "CtldPort": testcollector.FreePort(t), "SlurmdPort": testcollector.FreePort(t),
	})
	c.mkSpool(t, host)
	c.startDaemon(t, "", "slurmctld", filepath.Join(c.dir, "slurmctld.log"), "-D", "-f", c.conf)
	c.startDaemon(t, "", "slurmd", filepath.Join(c.dir, "slurmd-"+host+".log"), "-D", "-f", c.conf, "-N", host)
	c.waitIdle(t, 1)
	return c
}

// startSlurmNodes starts a cluster on l: slurmctld on l's first host, a
// slurmd on each of the others (16 CPUs each, so that two jobs of 4 tasks
// per node share the nodes), and waits until every node is idle.
func startSlurmNodes(t *testing.T, l *lan) *slurmCluster {
	t.Helper()
	ctld, nodes := l.hosts[0], l.hosts[1:]
	c := newSlurmCluster(t, ctld, l)
	conf := map[string]any{"CtldHost": ctld, "CtldAddr": l.addr[ctld], "CPUs": 16, "CtldPort": 6817, "SlurmdPort": 6818}
	var list []slurmNode
	for _, n := range nodes {
		list = append(list, slurmNode{n, l.addr[n]})
	}
	conf["Nodes"] = list
	c.writeConf(t, conf)
	c.mkSpool(t, nodes...)
	c.startDaemon(t, ctld, "slurmctld", filepath.Join(c.dir, "slurmctld.log"), "-D", "-f", c.conf)
	for _, n := range nodes {
		c.startDaemon(t, n, "slurmd", filepath.Join(c.dir, "slurmd-"+n+".log"), "-D", "-f", c.conf, "-N", n)
	}
	c.waitIdle(t, len(nodes))
	return c
}

// newSlurmCluster makes the cluster's directory and starts munged on this
// machine: its socket is a file, which every namespace's daemons reach.
func newSlurmCluster(t *testing.T, host string, l *lan) *slurmCluster {
	t.Helper()
	dir := t.TempDir()
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), host: host, lan: l}
	// munged wants its socket's directory searchable by every user.
	for d, mode := range map[string]os.FileMode{"munge": 0o755, "state": 0o700, "spool": 0o700} {
		if err := os.Mkdir(filepath.Join(dir, d), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	munge := filepath.Join(dir, "munge")
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(munge, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(munge, "munge.socket.2")
	c.startDaemon(t, "", "munged", filepath.Join(munge, "munged.log"), "--foreground", "--force",
		"--key-file="+filepath.Join(munge, "munge.key"), "--socket="+socket,
		"--pid-file="+filepath.Join(munge, "munged.pid"), "--log-file="+filepath.Join(munge, "munged.log"),
		"--seed-file="+filepath.Join(munge, "munged.seed"))
	waitFor(t, 15*time.Second, "munged's socket", func() bool { _, statErr := os.Stat(socket); return statErr == nil })
	return c
}

// mkSpool makes each node's own spool directory (SlurmdSpoolDir, .../%n).
func (c *slurmCluster) mkSpool(t *testing.T, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		if err := os.Mkdir(filepath.Join(c.dir, "spool", n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// waitIdle waits until sinfo shows n idle nodes. Called once the daemons
// run: when the test ends, every job left is then cancelled and gone before
// they stop (cleanups run last registered first).
func (c *slurmCluster) waitIdle(t *testing.T, n int) {
	t.Helper()
	t.Cleanup(func() { c.cancelAllJobs(t) })
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d idle nodes (sinfo)", n), func() bool {
		out, err := c.command("sinfo", "-h", "-N", "-o", "%T")
		return err == nil && strings.Count(out, "idle") == n && len(strings.Fields(out)) == n
	})
}

func (c *slurmCluster) writeConf(t *testing.T, values map[string]any) {
	t.Helper()
	firstJobID, err := rand.Int(rand.Reader, big.NewInt(500000))
	if err != nil {
		t.Fatal(err)
	}
	values["Dir"], values["MungeSocket"] = c.dir, filepath.Join(c.dir, "munge", "munge.socket.2")
	values["FirstJobID"] = 1000 + firstJobID.Int64()
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

// startDaemon runs a daemon in the foreground, on host of the cluster's lan
// ("": this machine); it is stopped by pid (SIGTERM, then SIGKILL after 15s)
// when the test ends, and its log is shown if the test failed.
func (c *slurmCluster) startDaemon(t *testing.T, host, name, logPath string, args ...string) {
	t.Helper()
	path, err := sbinPath(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(c.dir, name+"-"+cmp.Or(host, "local")+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	if host != "" {
		cmd = c.lan.command(nil, host, path, args...) //nolint:staticcheck // SA1012: no context: the daemon runs until the test's cleanup stops it
	}
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
	cmd := c.client(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// client is a SLURM client command: on this machine, or on the lan's
// slurmctld host.
func (c *slurmCluster) client(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	if c.lan != nil {
		cmd = c.lan.command(ctx, c.host, name, args...)
	}
	cmd.Env = c.env()
	return cmd
}

// sbatch submits a job with extra environment and returns its job id.
func (c *slurmCluster) sbatch(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := c.client(ctx, "sbatch", args...)
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
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.command("squeue", "-h", "-j", jobID, "-o", "%i")
		if err == nil && strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			job, _ := c.command("scontrol", "show", "job", jobID)
			nodes, _ := c.command("sinfo", "-N", "-o", "%N %T %E")
			t.Fatalf("timed out after %s waiting for job %s to end:\n%s\n%s", timeout, jobID, job, nodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
