// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// recipeSection is the README section whose recipes the tests run: its
// table gives, by compression, the recipe that reads complete records only
// ("read") and the one that reads every complete record of a file being
// written or left by a kill ("in every case": a cut last frame or line is
// skipped); its fenced sh blocks are the same recipes on the presets' files.
const recipeSection = "Where the output goes"

// recipes are the README's recipes by output file extension, the table's
// FILE replaced by "$1" and its select(...) by a filter that keeps every
// record.
type recipes struct{ strict, tolerant map[string]string }

// readmeRecipes reads the recipes from README.md, so that an edit there is
// what the tests run.
func readmeRecipes(t *testing.T) recipes {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := recipes{strict: map[string]string{}, tolerant: map[string]string{}}
	var fenced []string
	inSection, inFence := false, false
lines:
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = !inFence && inSection && strings.TrimPrefix(line, "```") == "sh"
			continue
		case inFence:
			fenced = append(fenced, line)
			continue
		case strings.HasPrefix(line, "## "):
			if inSection {
				break lines
			}
			inSection = strings.TrimPrefix(line, "## ") == recipeSection
			continue
		}
		if !inSection || !strings.HasPrefix(line, "| `") {
			continue
		}
		// | NEMO_JSONL_COMPRESSION | files | read | in every case |; a | inside a cell is \|.
		cells := strings.Split(strings.ReplaceAll(strings.Trim(line, "| "), `\|`, "\x00"), "|")
		if len(cells) != 4 {
			t.Fatalf("README.md %q: a recipe row has 4 cells, got %q", recipeSection, line)
		}
		if !strings.Contains(cells[1], "`") {
			continue // the header row
		}
		ext := filepath.Ext(recipeCell(t, cells[1]))
		r.strict[ext] = recipeOf(recipeCell(t, cells[2]))
		r.tolerant[ext] = recipeOf(recipeCell(t, cells[3]))
	}
	for _, ext := range []string{".zst", ".gz", ".jsonl"} {
		if r.strict[ext] == "" || r.tolerant[ext] == "" {
			t.Fatalf("README.md %q: no recipe row for %s files", recipeSection, ext)
		}
	}
	// The fenced recipes are the table's zstd ones on the presets' files
	// with a real filter.
	if len(fenced) == 0 {
		t.Fatalf("README.md %q: no sh block", recipeSection)
	}
	filter := regexp.MustCompile(`select\([^']*'`)
	for _, line := range fenced {
		generic := filter.ReplaceAllString(strings.ReplaceAll(line, "telemetry/*/traces.jsonl.zst", `"$1"`), `select(type == "object")'`)
		if generic != r.strict[".zst"] && generic != r.tolerant[".zst"] {
			t.Errorf("README.md %q: the sh line\n  %s\nis neither table zstd recipe:\n  %s\n  %s", recipeSection, line, r.strict[".zst"], r.tolerant[".zst"])
		}
	}
	return r
}

// recipeCell returns the one `code span` of a table cell, its \| unescaped.
func recipeCell(t *testing.T, cell string) string {
	t.Helper()
	_, code, ok := strings.Cut(cell, "`")
	code, _, closed := strings.Cut(code, "`")
	if !ok || !closed {
		t.Fatalf("README.md %q: no `code` in the cell %q", recipeSection, cell)
	}
	return strings.ReplaceAll(code, "\x00", "|")
}

func recipeOf(code string) string {
	return strings.ReplaceAll(strings.ReplaceAll(code, "FILE", `"$1"`), "select(...)", `select(type == "object")`)
}

// runRecipe runs a recipe on one file with bash (the strict one with
// pipefail: it must not hide a decoder's error; the tolerant one as a user
// types it, where jq's status is the pipeline's) and returns the lines it
// prints.
func runRecipe(recipe, path string, strict bool) ([]string, error) {
	shell := []string{"-c", recipe, "recipe", path}
	if strict {
		shell = append([]string{"-o", "pipefail"}, shell...)
	}
	out, err := exec.Command("bash", shell...).Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		err = fmt.Errorf("%s on %s: %w\n%.500s", recipe, path, err, ee.Stderr)
	} else if err != nil {
		err = fmt.Errorf("%s on %s: %w", recipe, path, err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines, err
}

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
	all := readmeRecipes(t)
	recipes := all.tolerant
	if strict {
		recipes = all.strict
	}
	var got lensemu.Result
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isOutputFile(path) {
			return err
		}
		lines, err := runRecipe(recipes[filepath.Ext(path)], path, strict)
		if _, statErr := os.Stat(path); err != nil && errors.Is(statErr, fs.ErrNotExist) {
			return nil // rotated away while a collector writes: its records are under the rotated name, listed or not
		}
		if err != nil {
			t.Error(err)
		}
		one := lineItem(t, path)
		for _, line := range lines {
			if !strings.HasPrefix(line, string(stepPointPrefix)) {
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

// TestRecipesReadREADME runs the README's recipes on files written as the
// collector writes them (one zstd frame or gzip member per write), complete
// and cut by a kill: both recipes read every record of a complete file; of a
// cut one, the tolerant recipe reads every complete record and the strict
// one fails.
func TestRecipesReadREADME(t *testing.T) {
	requireRecipeTools(t)
	r := readmeRecipes(t)
	writes := [][]string{
		{`{"name":"megatron.train_step","i":1}`, `{"name":"megatron.forward","i":2}`},
		{`{"name":"megatron.train_step","i":3}`},
	}
	const complete = 3
	for _, ext := range []string{".zst", ".gz", ".jsonl"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			whole := filepath.Join(dir, "traces.jsonl"+strings.TrimPrefix(ext, ".jsonl"))
			cut := filepath.Join(dir, "cut-traces.jsonl"+strings.TrimPrefix(ext, ".jsonl"))
			data := encodeWrites(t, ext, writes)
			// A kill in the middle of a write: the file ends in part of it.
			last := encodeWrites(t, ext, [][]string{{`{"name":"megatron.train_step","i":4,"attributes":{"long":"` + strings.Repeat("x", 4096) + `"}}`}})
			writeFile(t, whole, data)
			writeFile(t, cut, append(append([]byte{}, data...), last[:len(last)/2]...))

			for name, recipe := range map[string]string{"read": r.strict[ext], "in every case": r.tolerant[ext]} {
				lines, err := runRecipe(recipe, whole, true)
				if err != nil {
					t.Errorf("%q recipe on a complete file: %v", name, err)
				} else if len(lines) != complete {
					t.Errorf("%q recipe on a complete file: %d records, want %d", name, len(lines), complete)
				}
			}
			lines, err := runRecipe(r.tolerant[ext], cut, false)
			if err != nil {
				t.Errorf("%q recipe on a cut file: %v", "in every case", err)
			} else if len(lines) != complete {
				t.Errorf("%q recipe on a cut file: %d records, want %d", "in every case", len(lines), complete)
			}
			for _, line := range lines {
				if !json.Valid([]byte(line)) {
					t.Errorf("%q recipe printed a line that is not JSON: %.80s", "in every case", line)
				}
			}
			if _, err := runRecipe(r.strict[ext], cut, true); err == nil {
				t.Errorf("%q recipe on a cut file succeeded; it must fail on anything but complete records", "read")
			}
		})
	}
}

// encodeWrites encodes each write as the jsonl_file exporter does: one zstd
// frame or gzip member per write, or plain lines.
func encodeWrites(t *testing.T, ext string, writes [][]string) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, lines := range writes {
		var plain bytes.Buffer
		for _, l := range lines {
			plain.WriteString(l + "\n")
		}
		switch ext {
		case ".zst":
			enc, err := zstd.NewWriter(&out)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = enc.Write(plain.Bytes())
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
		case ".gz":
			zw := gzip.NewWriter(&out)
			_, _ = zw.Write(plain.Bytes())
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			out.Write(plain.Bytes())
		}
	}
	return out.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
