// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
)

// telemetry is what the jsonl_file exporter wrote under a directory.
type telemetry struct {
	lensemu.Result
	// ByRank counts items per rank (-1: no valid rank attribute).
	ByRank map[int64]lensemu.Result
	// ByRun counts items per nemo.run.id ("" for none).
	ByRun map[string]lensemu.Result
	// ByFile counts items per file, relative to the directory.
	ByFile map[string]lensemu.Result
	// ErrorSpans lists "rank/span name" of every span with status ERROR.
	ErrorSpans []string
	// Severities counts log records per rank and severity text, "rank/TEXT".
	Severities map[string]int
	// SpanRecords holds every span record, for tests that look at more.
	SpanRecords []record
	// StepPoints holds the nemo_steps processor's data points (metrics named
	// nemo.step.*, its stall gauges and its goodput metrics nemo.run.* and
	// nemo.rank.*). They are what the collector derived, not what a rank
	// sent, so they are counted in none of the above.
	StepPoints []record
	// StallRecords holds the nemo_steps processor's stall records
	// (nemo.run.stalled, nemo.run.resumed), likewise counted in none;
	// GoodputRecords its nemo.run.goodput records.
	StallRecords   []record
	GoodputRecords []record
}

// record is one JSONL line, decoded.
type record map[string]any

func (r record) str(key string) string { s, _ := r[key].(string); return s }

func (r record) resource() map[string]any { m, _ := r["resource"].(map[string]any); return m }

func (r record) attributes() map[string]any { m, _ := r["attributes"].(map[string]any); return m }

// rank reads the rank from the record's resource through the shared rank
// rules (int or decimal string, nv.dl.* before dl.*).
func (r record) rank() int64 {
	res := r.resource()
	for _, k := range rankattr.DefaultRankKeys {
		switch v := res[k].(type) {
		case json.Number:
			if n, err := v.Int64(); err == nil && n >= 0 {
				return n
			}
			return -1
		case string:
			if n, ok := rankattr.ParseString(v); ok {
				return n
			}
			return -1
		case nil:
			continue
		default:
			return -1
		}
	}
	return -1
}

// stepPointPrefix starts the JSONL line of a nemo_steps data point.
var stepPointPrefix = []byte(`{"name":"nemo.step.`)

// stallPointPrefix and behindPointPrefix start the lines of its stall gauges.
var (
	stallPointPrefix  = []byte(`{"name":"nemo.run.`)
	behindPointPrefix = []byte(`{"name":"nemo.rank.`)
)

// signalFile is the name of the file a (possibly rotated, possibly
// compressed) output file belongs to: traces-2026-12-01T11-57-50.813.jsonl
// and traces.jsonl.zst are traces.jsonl.
func signalFile(name string) string {
	name = plainName(name)
	if i := strings.IndexByte(name, '-'); i > 0 && strings.HasSuffix(name, ".jsonl") {
		return name[:i] + ".jsonl"
	}
	return name
}

// plainName is a (relative) output file name without its compression
// suffix: run/traces.jsonl.zst is run/traces.jsonl.
func plainName(name string) string {
	return strings.TrimSuffix(strings.TrimSuffix(name, ".zst"), ".gz")
}

// lineItem is what one line of the output file at path counts as, by the
// file's signal: a span, a data point or a log record.
func lineItem(t *testing.T, path string) lensemu.Result {
	t.Helper()
	switch signalFile(filepath.Base(path)) {
	case "traces.jsonl":
		return lensemu.Result{Spans: 1}
	case "metrics.jsonl":
		return lensemu.Result{DataPoints: 1}
	case "logs.jsonl":
		return lensemu.Result{LogRecords: 1}
	}
	t.Fatalf("unexpected output file %s", path)
	return lensemu.Result{}
}

// readTelemetry parses every output file under dir (traces.jsonl,
// metrics.jsonl, logs.jsonl per run directory; zstd-compressed .jsonl.zst
// as the presets write them, or .jsonl.gz). Every line must be a complete,
// strictly valid JSON object; jq must accept every file too. ByFile is keyed
// by the plain name (run/traces.jsonl).
func readTelemetry(t *testing.T, dir string) telemetry {
	t.Helper()
	got := telemetry{ByRank: map[int64]lensemu.Result{}, ByRun: map[string]lensemu.Result{}, ByFile: map[string]lensemu.Result{}, Severities: map[string]int{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isOutputFile(path) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = plainName(rel)
		checkWithJQ(t, path)
		eachLine(t, path, func(line []byte) {
			rec := decodeRecord(t, rel, line)
			var n lensemu.Result
			switch signalFile(filepath.Base(path)) {
			case "traces.jsonl":
				n.Spans = 1
				got.SpanRecords = append(got.SpanRecords, rec)
				if rec.str("status") == "StatusCode.ERROR" {
					got.ErrorSpans = append(got.ErrorSpans, fmt.Sprintf("%d/%s", rec.rank(), rec.str("name")))
				}
			case "metrics.jsonl":
				if derivedLine(line) {
					got.StepPoints = append(got.StepPoints, rec)
					return
				}
				n.DataPoints = 1
			case "logs.jsonl":
				switch ev, _ := rec.attributes()["event.name"].(string); {
				case ev == "nemo.run.goodput":
					got.GoodputRecords = append(got.GoodputRecords, rec)
					return
				case strings.HasPrefix(ev, "nemo.run."):
					got.StallRecords = append(got.StallRecords, rec)
					return
				}
				n.LogRecords = 1
				got.Severities[fmt.Sprintf("%d/%s", rec.rank(), rec.str("severity_text"))]++
			default:
				t.Fatalf("unexpected output file %s", rel)
			}
			got.Result = got.Add(n)
			got.ByRank[rec.rank()] = got.ByRank[rec.rank()].Add(n)
			runID, _ := rec.resource()["nemo.run.id"].(string)
			got.ByRun[runID] = got.ByRun[runID].Add(n)
			got.ByFile[rel] = got.ByFile[rel].Add(n)
		})
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return got
}

// decodeRecord parses one line strictly: a single JSON object, nothing after it.
func decodeRecord(t *testing.T, file string, line []byte) record {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var rec record
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("%s: line is not a JSON object: %v\n%.300s", file, err, line)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value on a line:\n%.300s", file, line)
	}
	return rec
}

// checkWithJQ runs jq over a file: every line must parse for the users' jq
// recipes to work. CI installs jq (.ci/run).
func checkWithJQ(t *testing.T, path string) {
	t.Helper()
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Fatalf("jq is not installed (apt-get install jq); the e2e tests check the output with it")
	}
	in := openOutput(t, path)
	defer in.Close()
	cmd := exec.Command(jq, "-e", "-n", "[inputs | type == \"object\"] | all")
	cmd.Stdin = in // decompressed, as `zstdcat file | jq` reads it
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("jq rejects %s: %v\n%.500s", path, err, out)
	}
}

// isOutputFile reports whether path is a JSONL output file: plain, or
// compressed as NEMO_JSONL_COMPRESSION (zstd by default, or gzip) says.
func isOutputFile(path string) bool {
	return strings.HasSuffix(plainName(path), ".jsonl")
}

// openOutput opens an output file for reading its lines, decompressing a
// .zst or .gz one (a concatenation of complete frames or members, one per
// write).
func openOutput(t *testing.T, path string) io.ReadCloser {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open output: %v", err)
	}
	switch {
	case strings.HasSuffix(path, ".zst"):
		zr, err := zstd.NewReader(f)
		if err != nil {
			f.Close()
			t.Fatalf("%s: %v", path, err)
		}
		return decoded{zr, zr.Close, f}
	case strings.HasSuffix(path, ".gz"):
		gr, err := gzip.NewReader(f)
		if errors.Is(err, io.EOF) { // an empty file: no member yet
			return f
		}
		if err != nil {
			f.Close()
			t.Fatalf("%s: %v", path, err)
		}
		return decoded{gr, func() { _ = gr.Close() }, f}
	}
	return f
}

// decoded is a decompressing reader of an open file.
type decoded struct {
	io.Reader
	release func()
	f       *os.File
}

func (d decoded) Close() error {
	d.release()
	return d.f.Close()
}

func eachLine(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	f := openOutput(t, path)
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				t.Fatalf("%s: last line is not newline-terminated (torn): %.300s", path, line)
			}
			fn(line[:len(line)-1])
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
