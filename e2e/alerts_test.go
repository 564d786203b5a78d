// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// requirePrometheus returns the paths of Debian's promtool and prometheus,
// or skips the test when they are missing; NEMO_REQUIRE_PROMETHEUS=1 (CI)
// makes that a failure.
func requirePrometheus(t *testing.T) (promtool, prometheus string) {
	t.Helper()
	var missing []string
	for _, name := range []string{"promtool", "prometheus"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		if name == "promtool" {
			promtool = p
		} else {
			prometheus = p
		}
	}
	if len(missing) == 0 {
		return promtool, prometheus
	}
	reason := strings.Join(missing, " and ") + " not installed (apt-get install prometheus)"
	if os.Getenv("NEMO_REQUIRE_PROMETHEUS") == "1" {
		t.Fatalf("NEMO_REQUIRE_PROMETHEUS=1, but %s", reason)
	}
	t.Skipf("%s (NEMO_REQUIRE_PROMETHEUS=1 makes this a failure)", reason)
	return "", ""
}

// TestAlertRules: deploy/prometheus/alerts.yaml is valid for promtool, and
// its unit tests (alerts_test.yaml: synthetic series for every alert, firing
// and not firing, with the exact labels and annotations a person gets) pass.
func TestAlertRules(t *testing.T) {
	promtool, _ := requirePrometheus(t)
	dir := filepath.Join(testcollector.RepoRoot(t), "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s (in deploy/prometheus): %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		if !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: no SUCCESS in its output:\n%s", strings.Join(args, " "), out)
		}
	}
}
