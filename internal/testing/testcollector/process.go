// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package testcollector // import "github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// ErrExited is what WaitForOK returns when the process ended first.
var ErrExited = errors.New("the process exited")

// Process is a program a test runs beside the code under test (the
// collector, or a real peer such as Jaeger), its stdout and stderr in a log
// file of the test's.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// StartProcess runs bin with args, with env added to the test process's
// environment, writing its output to <name>.log in a temporary directory.
func StartProcess(tb testing.TB, name, bin string, args []string, env map[string]string) *Process {
	tb.Helper()
	p := &Process{logPath: filepath.Join(tb.TempDir(), name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = os.Environ()
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout = logFile
	p.cmd.Stderr = logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit error; read it only after Done is closed.
func (p *Process) Err() error { return p.waitErr }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs returns everything the process wrote to stdout and stderr so far.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}

// WaitForOK polls url until it answers 200 (nil), the process exits
// (ErrExited) or timeout passes.
func (p *Process) WaitForOK(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return ErrExited
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s", url, timeout)
}

// Terminate sends SIGTERM, unless the process has exited already, and waits
// for it to exit. After timeout it kills it and returns false.
func (p *Process) Terminate(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		p.Kill()
		return false
	}
}

// Kill ends the process with SIGKILL and waits for it to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
