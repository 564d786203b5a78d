// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// A doc that quotes a measured figure wraps it in a marker naming its cell:
//
//	<!-- bench:100k/s preset cores_avg -->0.41<!-- /bench -->
//
// names the cell of BENCHMARKS.md's 100k/s table, row preset, column
// cores_avg (scenarioColumns); a cell's figure is its first word (0.80x of
// "0.80x file_1000_ranks"). The Go micro-benchmarks are cells too:
//
//	<!-- bench:micro ScaleOut/saturation/gateway_alone/1_run gateway_cpu_s/Mspans -->3.806<!-- /bench -->
//
// (the benchmark without its -GOMAXPROCS suffix, then benchstat's unit). A
// first field naming a dated run under bench/runs/ quotes that run instead:
//
//	<!-- bench:bench/runs/2026-12-01-jsonl-quiet.md saturation preset_all_ranks cpu_vs_baseline -->0.87x<!-- /bench -->
//
// A full run of TestScenarios rewrites the BENCHMARKS.md quotes after
// writing the report; TestDocsQuoteBenchmarks fails on a quote that differs
// from its cell, on one naming a cell that does not exist, and on a link to
// a heading BENCHMARKS.md or a dated run does not have.

var updateQuotes = flag.Bool("update-quotes", false, "TestDocsQuoteBenchmarks: rewrite the docs' quotes of BENCHMARKS.md instead of failing on them")

const benchReport = "BENCHMARKS.md"

var (
	quoteRE      = regexp.MustCompile(`<!-- bench:([^>]*?) -->(.*?)<!-- /bench -->`)
	reportLinkRE = regexp.MustCompile(`\]\(([^)\s#]*(?:BENCHMARKS\.md|bench/runs/[^)\s#]+\.md))#([^)\s]+)\)`)
	gomaxprocsRE = regexp.MustCompile(`-\d+$`)
)

// reportCells reads a report written by renderReport: its scenario tables,
// keyed "phase scenario column", and its micro-benchmarks, keyed
// "micro benchmark unit"; the value is the cell's first word.
func reportCells(text string) (map[string]string, error) {
	cells := map[string]string{}
	phaseOf := map[string]string{}
	for _, tb := range phaseTables {
		phaseOf[tb.title] = tb.phase
	}
	var phase, unit string
	micro, inCode := false, false
	for i, line := range strings.Split(text, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok && !inCode {
			phase, micro = phaseOf[title], title == "Go micro-benchmarks"
			continue
		}
		switch {
		case phase != "" && strings.HasPrefix(line, "| scenario |"):
			if line != scenarioTableHeader() {
				return nil, fmt.Errorf("line %d: the %s table's columns are %q, want %q", i+1, phase, line, scenarioTableHeader())
			}
		case phase != "" && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "|---"):
			row := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
			if len(row) != len(scenarioColumns) {
				return nil, fmt.Errorf("line %d: %d cells, want %d", i+1, len(row), len(scenarioColumns))
			}
			name := strings.TrimSpace(row[0])
			for j, c := range scenarioColumns[2:] {
				if f := strings.Fields(row[j+2]); len(f) > 0 {
					cells[phase+" "+name+" "+c.key] = f[0]
				}
			}
		case micro && strings.HasPrefix(line, "```"):
			inCode = !inCode
		case micro && inCode:
			f := strings.Fields(line)
			switch {
			case len(f) == 0:
			case f[0] == "│":
				unit = f[len(f)-2] // the last header line of a block is the unit
			case len(f) >= 2 && startsWithLetter(f[0]) && !strings.HasSuffix(f[0], ":") && f[0] != "geomean":
				cells["micro "+gomaxprocsRE.ReplaceAllString(f[0], "")+" "+unit] = f[1]
			}
		}
	}
	return cells, nil
}

// headingAnchors are the anchors GitHub gives a Markdown file's headings.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// quotingDocs are the repository's Markdown files that may quote a report:
// every one but the reports themselves and what is not the repository's
// (hidden and build directories, bench/out).
func quotingDocs(root string) ([]string, error) {
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || rel == "bench/out" || rel == "bench/runs") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".md") && rel != benchReport {
			docs = append(docs, rel)
		}
		return nil
	})
	return docs, err
}

// checkQuotes checks every doc's quotes and report links against the
// reports; with update it rewrites the quotes of BENCHMARKS.md that differ
// instead of reporting them (a dated run's are history: never rewritten).
// It returns what is wrong, one line each.
func checkQuotes(root string, update bool) ([]string, error) {
	docs, err := quotingDocs(root)
	if err != nil {
		return nil, err
	}
	type report struct {
		cells   map[string]string
		anchors map[string]bool
	}
	reports := map[string]report{}
	load := func(rel string) (report, error) {
		if r, ok := reports[rel]; ok {
			return r, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return report{}, err
		}
		cells, err := reportCells(string(b))
		if err != nil {
			return report{}, fmt.Errorf("%s: %w", rel, err)
		}
		reports[rel] = report{cells, headingAnchors(string(b))}
		return reports[rel], nil
	}
	var problems []string
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		text := string(b)
		if n, m := strings.Count(text, "<!-- bench:"), len(quoteRE.FindAllString(text, -1)); n != m {
			problems = append(problems, fmt.Sprintf("%s: %d quotes open with <!-- bench:, %d are closed on the same line with <!-- /bench -->", doc, n, m))
		}
		lineOf := func(offset int) int { return strings.Count(text[:offset], "\n") + 1 }
		for _, m := range reportLinkRE.FindAllStringSubmatchIndex(text, -1) {
			target := filepath.Clean(filepath.Join(filepath.Dir(doc), text[m[2]:m[3]]))
			r, err := load(target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: links to %s: %v", doc, lineOf(m[0]), target, err))
				continue
			}
			if anchor := text[m[4]:m[5]]; !r.anchors[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: links to #%s, a heading %s does not have", doc, lineOf(m[0]), anchor, target))
			}
		}
		var out strings.Builder
		last := 0
		for _, m := range quoteRE.FindAllStringSubmatchIndex(text, -1) {
			cell, quoted := strings.Fields(text[m[2]:m[3]]), text[m[4]:m[5]]
			source := benchReport
			if len(cell) == 4 {
				source, cell = cell[0], cell[1:]
			}
			where := fmt.Sprintf("%s:%d", doc, lineOf(m[0]))
			if len(cell) != 3 || (source != benchReport && !strings.HasPrefix(source, "bench/runs/")) {
				problems = append(problems, fmt.Sprintf("%s: quote %q: want <!-- bench:[bench/runs/FILE.md] PHASE SCENARIO COLUMN -->", where, text[m[2]:m[3]]))
				continue
			}
			r, err := load(source)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: quotes %s: %v", where, source, err))
				continue
			}
			key := strings.Join(cell, " ")
			want, ok := r.cells[key]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: quotes %q, a cell %s does not have", where, key, source))
			case quoted == want:
			case update && source == benchReport:
				out.WriteString(text[last:m[4]] + want)
				last = m[5]
			default:
				problems = append(problems, fmt.Sprintf("%s: quotes %q of %s as %q; it is %q", where, key, source, quoted, want))
			}
		}
		if last > 0 {
			out.WriteString(text[last:])
			if err := os.WriteFile(filepath.Join(root, doc), []byte(out.String()), 0o644); err != nil { //nolint:gosec // G306: a document of the repository, readable like its other files
				return nil, fmt.Errorf("rewrite %s: %w", doc, err)
			}
		}
	}
	return problems, nil
}

// TestDocsQuoteBenchmarks: what the docs quote of BENCHMARKS.md and of the
// dated runs is what those reports say (go test -run TestDocsQuoteBenchmarks
// -args -update-quotes in bench/ rewrites BENCHMARKS.md's).
func TestDocsQuoteBenchmarks(t *testing.T) {
	problems, err := checkQuotes(testcollector.RepoRoot(t), *updateQuotes)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestCheckQuotes(t *testing.T) {
	root := t.TempDir()
	report := "## Fixed 100,000 spans/s\n\nintro\n\n" + scenarioTableHeader() + "\n|---|\n" +
		"| preset | configs/file.yaml | 100,021 | 1.00x preset_stragglers_off | 4.11 | 1.13x | 0.41 | 1.04 | 309 | 1.82x | 13.3 | 1 | 0 | 1.71 |\n\n" +
		"## Go micro-benchmarks\n\n```\npkg: x\n          │ micro.txt │\n          │  sec/span  │\nRender-2     10.61n ± 12%\ngeomean      10.61n\n```\n"
	write := func(rel, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(benchReport, report)
	write("bench/runs/old.md", strings.ReplaceAll(report, "| 0.41 |", "| 0.52 |"))
	good := "<!-- bench:100k/s preset cores_avg -->0.41<!-- /bench --> cores, " +
		"<!-- bench:100k/s preset spans_vs_baseline -->1.00x<!-- /bench -->, " +
		"<!-- bench:micro Render sec/span -->10.61n<!-- /bench -->, " +
		"<!-- bench:bench/runs/old.md 100k/s preset cores_avg -->0.52<!-- /bench --> in [that run](../bench/runs/old.md#fixed-100000-spanss), " +
		"[rows](../BENCHMARKS.md#go-micro-benchmarks)\n"
	write("docs/good.md", good)
	problems, err := checkQuotes(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("correct quotes reported: %q", problems)
	}

	for name, tc := range map[string]struct{ doc, want string }{
		"a figure that drifted": {"<!-- bench:100k/s preset peak_rss_mib -->289<!-- /bench -->", `"100k/s preset peak_rss_mib" of BENCHMARKS.md as "289"; it is "309"`},
		"a dated run's figure":  {"<!-- bench:bench/runs/old.md 100k/s preset cores_avg -->0.41<!-- /bench -->", `of bench/runs/old.md as "0.41"; it is "0.52"`},
		"no such scenario":      {"<!-- bench:100k/s preset_gone cores_avg -->0.41<!-- /bench -->", `"100k/s preset_gone cores_avg", a cell BENCHMARKS.md does not have`},
		"no such column":        {"<!-- bench:100k/s preset cores -->0.41<!-- /bench -->", "a cell BENCHMARKS.md does not have"},
		"no such phase":         {"<!-- bench:10k/s preset cores_avg -->0.41<!-- /bench -->", "a cell BENCHMARKS.md does not have"},
		"no such benchmark":     {"<!-- bench:micro Marshal sec/span -->195.1n<!-- /bench -->", "a cell BENCHMARKS.md does not have"},
		"a report not in runs":  {"<!-- bench:docs/good.md 100k/s preset cores_avg -->0.41<!-- /bench -->", "want <!-- bench:"},
		"an unclosed quote":     {"<!-- bench:100k/s preset cores_avg -->0.41", "1 quotes open"},
		"a heading not there":   {"[goals](../BENCHMARKS.md#goals)", "links to #goals, a heading BENCHMARKS.md does not have"},
		"a run not there":       {"[run](../bench/runs/new.md#goals)", "links to bench/runs/new.md"},
	} {
		t.Run(name, func(t *testing.T) {
			write("docs/bad.md", tc.doc+"\n")
			found, qerr := checkQuotes(root, false)
			if qerr != nil {
				t.Fatal(qerr)
			}
			if len(found) != 1 || !strings.Contains(found[0], tc.want) {
				t.Errorf("problems %q, want one containing %q", found, tc.want)
			}
		})
	}

	// -update-quotes rewrites a drifted BENCHMARKS.md quote, and only that.
	write("docs/bad.md", "at <!-- bench:100k/s preset peak_rss_mib -->289<!-- /bench --> MiB and <!-- bench:bench/runs/old.md 100k/s preset cores_avg -->0.41<!-- /bench --> cores\n")
	problems, err = checkQuotes(root, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "bench/runs/old.md") {
		t.Errorf("problems after update %q, want the dated run's quote only", problems)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/bad.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "at <!-- bench:100k/s preset peak_rss_mib -->309<!-- /bench --> MiB and <!-- bench:bench/runs/old.md 100k/s preset cores_avg -->0.41<!-- /bench --> cores\n"; string(b) != want {
		t.Errorf("rewritten doc\n%s\nwant\n%s", b, want)
	}
}

func startsWithLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r)
}
