// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// Several hosts on one machine: one Linux network namespace per host, each
// with a veth pair on a bridge and an address of a private range that exists
// inside the namespaces only. The bridge lives in a namespace of its own
// too, so that nothing of the cluster is in the machine's namespace: its
// firewall (dockerd's FORWARD DROP, which br_netfilter applies to bridged
// traffic) does not see the cluster's packets, and nothing outside can reach
// them or be reached. Each
// process started on a host also gets a UTS namespace with the host's name
// and a mount namespace in which /etc/hosts names every host (a bind mount
// of the test's own file). The processes enter the network namespace with
// nsenter, not ip netns exec, which would remount /sys and hide the
// cgroup hierarchy slurmd needs. Everything is removed when the test ends:
// the processes in the namespaces by pid, the namespaces, the bridge.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lanSubnet is the private range inside the namespaces: 10.213.0.0/24.
const lanSubnet = "10.213.0."

// requireNetns skips the test when network namespaces cannot be made here
// (not root, no ip or unshare), unless NEMO_REQUIRE_SLURM=1: the multi-node
// SLURM test then fails instead, as the one-node test does.
func requireNetns(t *testing.T) {
	t.Helper()
	var reason string
	for _, name := range []string{"ip", "nsenter", "unshare", "hostname", "mount", "bash"} {
		if _, err := exec.LookPath(name); err != nil {
			reason = fmt.Sprintf("%s is not installed (apt-get install iproute2 util-linux hostname)", name)
			break
		}
	}
	if reason == "" && os.Geteuid() != 0 {
		reason = "network namespaces need root; run the test as root"
	}
	if reason == "" {
		probe := "nemo-probe-" + randomID(t)
		if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
			reason = fmt.Sprintf("ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
		} else {
			_ = exec.Command("ip", "netns", "del", probe).Run()
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("NEMO_REQUIRE_SLURM") == "1" {
		t.Fatalf("NEMO_REQUIRE_SLURM=1, but %s", reason)
	}
	t.Skipf("%s (NEMO_REQUIRE_SLURM=1 makes this a failure)", reason)
}

func randomID(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// lan is a set of hosts, one network namespace each, on one bridge.
type lan struct {
	id, hostsFile string
	hosts         []string          // in the order given
	addr          map[string]string // host -> address
}

// newLAN makes the hosts (names of at most 8 characters) with addresses
// 10.213.0.10, .11, ... in the order given.
func newLAN(t *testing.T, hosts ...string) *lan {
	t.Helper()
	l := &lan{id: randomID(t), hosts: hosts, addr: map[string]string{}, hostsFile: filepath.Join(t.TempDir(), "hosts")}
	bridge := "nb" + l.id
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(l.remove)
	run("netns", "add", l.switchNetns())
	run("-n", l.switchNetns(), "link", "add", bridge, "type", "bridge")
	run("-n", l.switchNetns(), "link", "set", bridge, "up")
	var hostsFile strings.Builder
	hostsFile.WriteString("127.0.0.1 localhost\n")
	for i, h := range hosts {
		l.addr[h] = lanSubnet + strconv.Itoa(10+i)
		fmt.Fprintf(&hostsFile, "%s %s\n", l.addr[h], h)
	}
	for i, h := range hosts {
		ns, veth := l.netns(h), fmt.Sprintf("nv%s%d", l.id, i)
		run("netns", "add", ns)
		run("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run("link", "set", veth, "netns", l.switchNetns())
		run("-n", l.switchNetns(), "link", "set", veth, "master", bridge, "up")
		run("-n", ns, "link", "set", "lo", "up")
		run("-n", ns, "addr", "add", l.addr[h]+"/24", "dev", "eth0")
		run("-n", ns, "link", "set", "eth0", "up")
	}
	if err := os.WriteFile(l.hostsFile, []byte(hostsFile.String()), 0o644); err != nil { //nolint:gosec // G306: the hosts' /etc/hosts, read by every process on them
		t.Fatal(err)
	}
	return l
}

func (l *lan) netns(host string) string { return "nemo-" + l.id + "-" + host }

// switchNetns is the namespace of the bridge.
func (l *lan) switchNetns() string { return "nemo-" + l.id + "-switch" }

// argv is the arguments of nsenter that run name on host: in its network
// namespace, with the host's name in a UTS namespace of its own. The
// process nsenter starts is name's (each step execs the next), so its pid is
// name's.
func (l *lan) argv(host, name string, args ...string) []string {
	return append([]string{
		"--net=/run/netns/" + l.netns(host), "--", "unshare", "--uts", "--mount", "--",
		"sh", "-c", `hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"`, host, l.hostsFile, name,
	}, args...)
}

// command is name on host (lan.argv).
func (l *lan) command(ctx context.Context, host, name string, args ...string) *exec.Cmd {
	argv := l.argv(host, name, args...)
	if ctx == nil {
		return exec.Command("nsenter", argv...)
	}
	return exec.CommandContext(ctx, "nsenter", argv...)
}

// pids lists the processes in host's network namespace.
func (l *lan) pids(host string) []int {
	out, _ := exec.Command("ip", "netns", "pids", l.netns(host)).Output() //nolint:gosec // G204: the test's own namespace name
	var pids []int
	for f := range strings.FieldsSeq(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kill ends every process on host with SIGKILL, as a node that loses power
// ends, and waits (bounded) until none is left.
func (l *lan) kill(t *testing.T, host string) []int {
	t.Helper()
	killed := l.pids(host)
	deadline := time.Now().Add(10 * time.Second)
	for pids := killed; len(pids) > 0; pids = l.pids(host) {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v on %s survive SIGKILL", pids, host)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// httpGet fetches http://addr/path from inside host's namespace, with
// bash's /dev/tcp (no curl on the machine needed), and returns the body.
func (l *lan) httpGet(host, addr, path string) (string, error) {
	h, port, ok := strings.Cut(addr, ":")
	if !ok {
		return "", fmt.Errorf("address %q has no port", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	script := `exec 3<>"/dev/tcp/$1/$2" && printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3 && cat <&3`
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+l.netns(host), "--", "bash", "-c", script, "bash", h, port, path).Output() //nolint:gosec // G204: the test's own namespace and addresses
	if err != nil {
		return "", fmt.Errorf("GET %s%s in %s: %w", addr, path, host, err)
	}
	head, body, _ := strings.Cut(string(out), "\r\n\r\n")
	if !strings.Contains(strings.SplitN(head, "\r\n", 2)[0], " 200 ") {
		return "", fmt.Errorf("GET %s%s in %s: %s", addr, path, host, strings.SplitN(head, "\r\n", 2)[0])
	}
	return body, nil
}

// remove stops what runs in the namespaces and removes them (the bridge
// goes with its namespace).
func (l *lan) remove() {
	for _, h := range l.hosts {
		for range 100 {
			pids := l.pids(h)
			if len(pids) == 0 {
				break
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = exec.Command("ip", "netns", "del", l.netns(h)).Run() //nolint:gosec // G204: the test's own namespace name
	}
	_ = exec.Command("ip", "netns", "del", l.switchNetns()).Run() //nolint:gosec // G204: the test's own namespace name (it holds the bridge)
}
