// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

var (
	// configRef is a ${scheme:...} reference of any config source that reads
	// environment variables: ${env:NAME:-default}, ${required:NAME},
	// ${grpcendpoint:NAME}, ${grpcinsecure:ENDPOINT:INSECURE}, ...
	configRef = regexp.MustCompile(`\$\{[a-z][a-z0-9]*:([^}]*)\}`)
	// headerVar is a variable name as headers write them.
	headerVar = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)
	// variableList opens a header's list of the variables the file reads.
	variableList = regexp.MustCompile(`(?i)^# (?:required |optional )?environment variables|^# (?:required|optional):`)
	envVarName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// configReads returns the environment variables a config file reads outside
// its comments: every name in a ${scheme:...} reference, its default
// (after ":-") left out.
func configReads(text string) map[string]bool {
	reads := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range configRef.FindAllStringSubmatch(line, -1) {
			args, _, _ := strings.Cut(m[1], ":-")
			for name := range strings.SplitSeq(args, ":") {
				if envVarName.MatchString(name) {
					reads[name] = true
				}
			}
		}
	}
	return reads
}

// headerList returns the variables named in a config file's variable list:
// from the header line that opens it ("# Environment variables", "# Required
// environment variables:", "# Required:", ...) to the end of the header
// comment. The SDK's OTEL_* variables are left out: headers name them for
// comparison, and no preset reads them. ok is false when there is no list.
func headerList(text string) (names map[string]bool, ok bool) {
	names = map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		ok = ok || variableList.MatchString(line)
		if !ok {
			continue
		}
		for _, name := range headerVar.FindAllString(line, -1) {
			if !strings.HasPrefix(name, "OTEL_") {
				names[name] = true
			}
		}
	}
	return names, ok
}

// TestPresetHeadersListWhatTheyRead: the header comment of every preset and
// overlay lists exactly the environment variables the file reads, so a user
// reading a preset's top sees every knob it has and none it lacks.
func TestPresetHeadersListWhatTheyRead(t *testing.T) {
	root := testcollector.RepoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "configs", "*.yaml"))
	overlays, _ := filepath.Glob(filepath.Join(root, "configs", "overlays", "*.yaml"))
	files = append(files, overlays...)
	if len(files) < 10 {
		t.Fatalf("found %d presets and overlays under configs/: the glob is broken", len(files))
	}
	total := 0
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			reads := configReads(string(raw))
			total += len(reads)
			listed, ok := headerList(string(raw))
			if !ok {
				if len(reads) > 0 {
					t.Errorf("reads %v but its header has no list of them (# Environment variables:, # Required:, # Optional:)", slices.Sorted(maps.Keys(reads)))
				}
				return
			}
			for _, name := range slices.Sorted(maps.Keys(reads)) {
				if !listed[name] {
					t.Errorf("reads %s, which its header's variable list does not name", name)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(listed)) {
				if !reads[name] {
					t.Errorf("its header's variable list names %s, which it does not read", name)
				}
			}
		})
	}
	if total < 50 {
		t.Errorf("found %d variable reads in all the configs: the scan is broken", total)
	}
}

func TestConfigReadsAndHeaderList(t *testing.T) {
	reads := configReads("# ${env:IN_A_COMMENT}\nx: ${env:A_B:-localhost}\ny: ${grpcinsecure:E_F:G_H} ${required:I_J} ${file:/etc/x.yaml} ${grpcendpoint:K_L:-host:4317}\n")
	if want := []string{"A_B", "E_F", "G_H", "I_J", "K_L"}; !slices.Equal(slices.Sorted(maps.Keys(reads)), want) {
		t.Errorf("configReads = %v, want %v", slices.Sorted(maps.Keys(reads)), want)
	}
	names, ok := headerList("# preset\n# Run: X_Y=1 OTEL_EXPORTER_OTLP_ENDPOINT=...\n#\n# Environment variables:\n#   A_B, E_F  what\n#   G_H (the OTEL_EXPORTER_OTLP_HEADERS format)\n\nx: ${env:NOT_HEADER}\n")
	if want := []string{"A_B", "E_F", "G_H"}; !ok || !slices.Equal(slices.Sorted(maps.Keys(names)), want) {
		t.Errorf("headerList = %v, %v; want %v, true", slices.Sorted(maps.Keys(names)), ok, want)
	}
	if _, ok := headerList("# overlay\n# mentions NEMO_X\n"); ok {
		t.Error("a header without a list has one")
	}
}
