package e2e

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
)

// TestFilePresetCompressed: the file preset with NEMO_JSONL_COMPRESSION=zstd
// writes traces.jsonl.zst, metrics.jsonl.zst and logs.jsonl.zst per run,
// and they hold every item the ranks had acknowledged, each line a JSON
// record.
func TestFilePresetCompressed(t *testing.T) {
	env := testEnv(t)
	env["NEMO_JSONL_COMPRESSION"] = "zstd"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(c, "run-zstd", 4, 3))
	c.Stop()

	var got lensemu.Result
	files := 0
	err := filepath.WalkDir(env["NEMO_TELEMETRY_DIR"], func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(path, ".jsonl.zst") {
			t.Errorf("unexpected output file %s: want only .jsonl.zst", path)
			return nil
		}
		files++
		lines := zstdLines(t, path)
		for _, line := range lines {
			if strings.HasPrefix(line, string(stepPointPrefix)) {
				continue // the collector's own step metrics
			}
			var one lensemu.Result
			switch signalFile(strings.TrimSuffix(filepath.Base(path), ".zst")) {
			case "traces.jsonl":
				one.Spans = 1
			case "metrics.jsonl":
				one.DataPoints = 1
			case "logs.jsonl":
				one.LogRecords = 1
			}
			decodeRecord(t, path, []byte(line))
			got = got.Add(one)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 3 {
		t.Errorf("want the run's three .jsonl.zst files, found %d", files)
	}
	if got != sent {
		t.Errorf("acknowledged %s, found %s in the compressed files", describe(sent), describe(got))
	}
}

// zstdLines decompresses a file of concatenated zstd frames into its lines.
func zstdLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var out []string
	r := bufio.NewReaderSize(dec, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if !strings.HasSuffix(line, "\n") {
				t.Fatalf("%s: a line without its newline: %.200s", path, line)
			}
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
