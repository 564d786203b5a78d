// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package testcollector

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProcessExitAndLogs(t *testing.T) {
	p := StartProcess(t, "echo", "/bin/sh", []string{"-c", `echo "hello $GREETING"; exit 3`}, map[string]string{"GREETING": "there"})
	err := p.WaitForOK("http://127.0.0.1:1/", 10*time.Second)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitForOK on an exiting process: %v, want ErrExited", err)
	}
	if p.Err() == nil || !strings.Contains(p.Logs(), "hello there") {
		t.Errorf("exit error %v, log %q: want exit status 3 and the environment's greeting", p.Err(), p.Logs())
	}
	if !p.Terminate(time.Second) {
		t.Error("Terminate of an exited process reported a timeout")
	}
}

func TestProcessTerminate(t *testing.T) {
	p := StartProcess(t, "sleep", "/bin/sh", []string{"-c", "exec sleep 60"}, nil)
	if !p.Terminate(10 * time.Second) {
		t.Fatal("sleep did not end on SIGTERM")
	}
	stubborn := StartProcess(t, "stubborn", "/bin/sh", []string{"-c", `trap "" TERM; while :; do sleep 0.1; done`}, nil)
	time.Sleep(200 * time.Millisecond) // let the shell install its trap
	if stubborn.Terminate(300 * time.Millisecond) {
		t.Fatal("a process ignoring SIGTERM was reported as terminated in time")
	}
	select {
	case <-stubborn.Done():
	default:
		t.Fatal("Terminate returned without killing the process")
	}
}

func TestRequireFileSkipsOrFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	var skipped bool
	t.Run("skip", func(t *testing.T) {
		t.Setenv(RequireBinaryEnv, "")
		defer func() { skipped = t.Skipped() }()
		RequireFile(t, missing, "collector binary", "make build")
	})
	if !skipped {
		t.Error("a missing file without $" + RequireBinaryEnv + " did not skip the test")
	}
	RequireFile(t, filepath.Dir(missing), "directory", "make build") // present: no skip
}
