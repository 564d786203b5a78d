package e2e

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
)

// The README's recipes for reading the JSONL output, by compression: the
// tolerant one reads every complete record of a file that is being written
// or was left by a kill (a cut last frame or line is skipped); the strict
// one fails on anything but complete records. "$1" is the file.
var (
	tolerantRecipe = map[string]string{
		".zst":   `zstd -dc "$1" 2>/dev/null | jq -cR 'fromjson? | select(type == "object")'`,
		".gz":    `zcat "$1" 2>/dev/null | jq -cR 'fromjson? | select(type == "object")'`,
		".jsonl": `jq -cR 'fromjson? | select(type == "object")' "$1"`,
	}
	strictRecipe = map[string]string{
		".zst":   `zstd -dc "$1" | jq -c 'select(type == "object")'`,
		".gz":    `zcat "$1" | jq -c 'select(type == "object")'`,
		".jsonl": `jq -c 'select(type == "object")' "$1"`,
	}
)

// requireRecipeTools fails the test when a tool of the recipes is missing.
func requireRecipeTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "jq", "zstd", "zcat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install zstd jq); the e2e tests run the README's recipes with it", tool)
		}
	}
}

// readWithRecipe runs the tolerant (or strict) recipe over every output
// file under dir with bash (the strict one with pipefail: it must not hide a
// decoder's error; the tolerant one as a user types it, where jq's status is
// the pipeline's) and counts the records it prints, by signal. Step
// metrics the collector derives (nemo_steps) are not counted.
func readWithRecipe(t *testing.T, dir string, strict bool) lensemu.Result {
	t.Helper()
	recipes := tolerantRecipe
	if strict {
		recipes = strictRecipe
	}
	var got lensemu.Result
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isOutputFile(path) {
			return err
		}
		recipe := recipes[filepath.Ext(path)]
		shell := []string{"-c", recipe, "recipe", path}
		if strict {
			shell = append([]string{"-o", "pipefail"}, shell...)
		}
		out, err := exec.Command("bash", shell...).Output()
		if _, statErr := os.Stat(path); err != nil && errors.Is(statErr, fs.ErrNotExist) {
			return nil // rotated away while a collector writes: its records are under the rotated name, listed or not
		}
		if err != nil {
			var stderr string
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				stderr = string(ee.Stderr)
			}
			t.Errorf("%s on %s: %v\n%.500s", recipe, path, err, stderr)
		}
		one := lineItem(t, path)
		for line := range strings.SplitSeq(string(out), "\n") {
			if line != "" && !strings.HasPrefix(line, string(stepPointPrefix)) {
				got = got.Add(one)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return got
}
