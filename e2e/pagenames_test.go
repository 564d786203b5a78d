// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The names the NeMo Lens "Send Telemetry to a Backend" page uses for the
// files of its repository, and the way from each to ours: the page-names
// table in README.md and docs/configuration.md, the links in observability/,
// and the image's names (docker/build.sh). Also the page's Grafana variable.

// pageNames are the page's names for its bundled collector configs, as it
// writes them.
var pageNames = []string{
	"observability/otel-collector-weave.yaml",     // Weave through a collector: "see observability/otel-collector-weave.yaml"
	"--config=/etc/otel/collector-weave.yaml",     // the docker-compose.otel.yml mode that goes with it
	"collector-honeycomb.yaml",                    // Honeycomb through a collector: "collector-honeycomb.yaml in the repository"
	"--config=/etc/otel/collector-honeycomb.yaml", // "uncomment --config=/etc/otel/collector-honeycomb.yaml"
	"observability/",                              // "bundled configurations live under observability/", at /etc/otel/collector*.yaml
}

// pageNamesHeading is the title of the table's section in both documents.
const pageNamesHeading = "The NeMo Lens page's file names"

// linkDir holds the links named as the page names them.
const linkDir = "observability"

// pageNameRow is one row of the table: the page's name, our files (the
// preset, then links to it), and the preset's path in the image. A row that
// holds <preset> stands for every preset.
type pageNameRow struct {
	page  string
	ours  []string
	image string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// pageNamesTable reads the table of the page-names section of a document.
func pageNamesTable(t *testing.T, doc string) []pageNameRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	var rows []pageNameRow
	inSection, inTable := false, false
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			if inSection {
				break
			}
			inSection = strings.TrimSpace(strings.TrimLeft(line, "#")) == pageNamesHeading
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if !inTable || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			inTable = true // the header, then the separator
			continue
		}
		if len(cells) != 3 {
			t.Fatalf("%s: page-names row %q: want 3 cells (the page says | here | in the image)", doc, line)
		}
		var code [3][]string
		for i, c := range cells {
			for _, m := range codeSpan.FindAllStringSubmatch(c, -1) {
				code[i] = append(code[i], m[1])
			}
			if len(code[i]) == 0 {
				t.Fatalf("%s: page-names row %q: cell %d names no file in `code`", doc, line, i+1)
			}
		}
		rows = append(rows, pageNameRow{page: code[0][0], ours: code[1], image: code[2][0]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table under a heading %q", doc, pageNamesHeading)
	}
	return rows
}

func presetNames(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no presets in configs/: %v", err)
	}
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

// sameFile reports whether two paths of the repository are one file once
// links are followed.
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	root := testcollector.RepoRoot(t)
	fa, err := os.Stat(filepath.Join(root, a))
	if err != nil {
		t.Errorf("%s: %v", a, err)
		return false
	}
	fb, err := os.Stat(filepath.Join(root, b))
	if err != nil {
		t.Errorf("%s: %v", b, err)
		return false
	}
	return os.SameFile(fa, fb)
}

// TestPageNamesTable: README.md and docs/configuration.md hold the same table;
// it lists every name the page uses; and in every row (for every preset where
// it says <preset>) our first file is a preset of configs/, the other files
// (links in observability/) and the page's name are that same file, and the
// image path is a name docker/build.sh gives that preset (and --config= names
// on the page are that image path).
func TestPageNamesTable(t *testing.T) {
	root := testcollector.RepoRoot(t)
	rows := pageNamesTable(t, "README.md")
	if other := pageNamesTable(t, filepath.Join("docs", "configuration.md")); !slices.EqualFunc(rows, other, func(a, b pageNameRow) bool {
		return a.page == b.page && slices.Equal(a.ours, b.ours) && a.image == b.image
	}) {
		t.Errorf("the page-names tables differ:\nREADME.md:             %+v\ndocs/configuration.md: %+v", rows, other)
	}
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.page] = true
	}
	for _, name := range pageNames {
		if !listed[name] {
			t.Errorf("the page's name %q is not in the page-names table", name)
		}
	}

	names := imageNames(t)
	for _, r := range rows {
		presets := []string{""}
		if strings.Contains(r.image, "<preset>") || slices.ContainsFunc(r.ours, func(s string) bool { return strings.Contains(s, "<preset>") }) {
			presets = presetNames(t)
		}
		for _, preset := range presets {
			expand := func(s string) string {
				return strings.ReplaceAll(s, "<preset>", strings.TrimSuffix(preset, ".yaml"))
			}
			ours, image := expand(r.ours[0]), expand(r.image)
			name, ok := strings.CutPrefix(ours, "configs/")
			if !ok || strings.Contains(name, "/") || !strings.HasSuffix(name, ".yaml") {
				t.Errorf("%s: our file %s is not a preset of configs/", r.page, ours)
				continue
			}
			if fi, err := os.Lstat(filepath.Join(root, ours)); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s: our file %s is not a file of the repository: %v", r.page, ours, err)
				continue
			}
			if got, ok := names[image]; !ok || got != name {
				t.Errorf("%s: the image path %s is not a name docker/build.sh gives configs/%s (it names %q)", r.page, image, name, got)
			}
			if got, _ := presetFile(image); got != name {
				t.Errorf("%s: presetFile(%s) = %q, want %s: the tests' mapping disagrees with the image", r.page, image, got, name)
			}
			for _, o := range r.ours[1:] {
				if link := expand(o); !sameFile(t, link, ours) {
					t.Errorf("%s: %s is not %s", r.page, link, ours)
				}
			}
			switch page := r.page; {
			case strings.HasPrefix(page, "--config="):
				if path := strings.TrimPrefix(page, "--config="); path != image {
					t.Errorf("%s: the page's path %s is not the image path %s of the row", page, path, image)
				}
			case strings.HasSuffix(page, "/"):
				fi, err := os.Stat(filepath.Join(root, page))
				if err != nil || !fi.IsDir() {
					t.Errorf("%s: no such directory in the repository: %v", page, err)
				}
				if !slices.ContainsFunc(r.ours[1:], func(o string) bool { return strings.HasPrefix(o, page) }) {
					t.Errorf("%s: the row names no file of that directory", page)
				}
			case !strings.Contains(page, "/"):
				// A bare name "in the repository": the row says where it is.
				if !slices.ContainsFunc(r.ours, func(o string) bool { return filepath.Base(o) == page }) {
					t.Errorf("%s: the row names no file of that name (%v)", page, r.ours)
				}
			default:
				if !sameFile(t, page, ours) {
					t.Errorf("%s is not %s", page, ours)
				}
			}
		}
	}
}

// TestPageNamesLinks: every file of observability/ (but its README) is a
// relative link into ../configs/ to the preset its name says, by the image's
// naming rule ("otel-" aside: otel-collector-weave.yaml is the image's
// collector-weave.yaml); every preset has its collector-<preset>.yaml there;
// and the binary validates each preset through its links.
func TestPageNamesLinks(t *testing.T) {
	root := testcollector.RepoRoot(t)
	names := imageNames(t)
	entries, err := os.ReadDir(filepath.Join(root, linkDir))
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{} // link -> preset
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		path := filepath.Join(linkDir, e.Name())
		if e.Type()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a link: keep the presets in configs/ and link them here", path)
			continue
		}
		target, err := os.Readlink(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		want, ok := names[presetDir+strings.TrimPrefix(e.Name(), "otel-")]
		if !ok {
			t.Errorf("%s: the image has no preset by the name %s", path, strings.TrimPrefix(e.Name(), "otel-"))
			continue
		}
		// Relative, so that it holds in every clone.
		if target != "../configs/"+want {
			t.Errorf("%s -> %s, want ../configs/%s", path, target, want)
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, path)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s -> %s does not resolve to a file: %v", path, target, err)
			continue
		}
		links[path] = want
	}
	for _, preset := range presetNames(t) {
		if path := filepath.Join(linkDir, "collector-"+preset); links[path] != preset {
			t.Errorf("%s is missing: every preset has its link named as in the image", path)
		}
	}

	t.Run("validate through the links", func(t *testing.T) {
		for _, path := range slices.Sorted(maps.Keys(links)) {
			if out, err := testcollector.Run(t, testEnv(t), "validate", "--config="+filepath.Join(root, path)); err != nil {
				t.Errorf("validate --config=%s: %v\n%s", path, err, out)
			}
		}
	})
}

// dashboardVar is a variable in a Grafana query: $name or ${name...}.
var dashboardVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// TestGrafanaDashboardVariable: the page tells users to pick the run with the
// dashboard variable nemo_run_id. deploy/grafana/nemo-steps.json defines it
// from the nemo_run_id label; every query of the nemo_steps processor's nemo_step_*
// metrics filters on it; and every variable a query uses is one the dashboard
// defines (or one of Grafana's own, $__...).
func TestGrafanaDashboardVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), "deploy", "grafana", "nemo-steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/nemo-steps.json: %v", err)
	}
	defined := map[string]bool{}
	for _, v := range dash.Templating.List {
		defined[v.Name] = true
		if v.Name == "nemo_run_id" && !strings.Contains(v.Definition, ", nemo_run_id)") {
			t.Errorf("variable nemo_run_id lists %q, want the values of the nemo_run_id label", v.Definition)
		}
	}
	if !defined["nemo_run_id"] {
		t.Fatalf("the dashboard defines no variable nemo_run_id (it has %v)", dash.Templating.List)
	}
	filtered := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range dashboardVar.FindAllStringSubmatch(tg.Expr, -1) {
				if !defined[m[1]] && !strings.HasPrefix(m[1], "__") {
					t.Errorf("panel %q: query %q uses $%s, which the dashboard does not define", p.Title, tg.Expr, m[1])
				}
			}
			if strings.Contains(tg.Expr, "nemo_step_") {
				if !strings.Contains(tg.Expr, `nemo_run_id=~"$nemo_run_id"`) {
					t.Errorf("panel %q: query %q does not filter on the variable nemo_run_id", p.Title, tg.Expr)
				}
				filtered++
			}
		}
	}
	if filtered == 0 {
		t.Error("no panel queries the nemo_step_* metrics: the scan is broken")
	}
}
