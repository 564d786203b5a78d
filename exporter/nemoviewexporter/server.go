// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// The pages' HTML, script and style, embedded: clusters are often offline,
// so nothing is fetched from anywhere but this collector.
//
//go:embed assets
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"pathEscape": url.PathEscape,
	"iteration":  func(p *int64) string { return deref(p, "%d") },
	"seconds":    func(p *float64) string { return deref(p, "%.3f s") },
	"percent": func(p *float64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%.1f%%", *p*100)
	},
}).ParseFS(assets, "assets/*.html"))

// deref formats what p points to, and nothing for nil.
func deref[T any](p *T, format string) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(format, *p)
}

// handler serves the pages and their JSON.
type handler struct {
	store   *store
	refresh int64 // milliseconds
	js, css []byte
	letters string // the runs' directory of the dead letters ("": none listed)
}

// maxDeadLetterFiles bounds the files a run page lists.
const maxDeadLetterFiles = 50

// detail is a run's page data: what the store holds, and the run's
// dead-letter files, read from disk at each request (the exporters that
// write them are other components).
func (h *handler) detail(key string) (runDetail, bool) {
	d, ok := h.store.detail(key)
	if ok && h.letters != "" {
		d.DeadLetters = deadletter.List(h.letters, key, maxDeadLetterFiles)
	}
	return d, ok
}

func newHandler(s *store, cfg *Config) http.Handler {
	js, _ := assets.ReadFile("assets/view.js")
	css, _ := assets.ReadFile("assets/view.css")
	h := &handler{store: s, refresh: cfg.RefreshInterval.Milliseconds(), js: js, css: css, letters: cfg.DeadLetterDirectory}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /runs/{key}", h.run)
	mux.HandleFunc("GET /api/runs", h.apiRuns)
	mux.HandleFunc("GET /api/runs/{key}", h.apiRun)
	mux.HandleFunc("GET /api/runs/{key}/steps/{iteration}", h.apiTimeline)
	mux.HandleFunc("GET /api/runs/{key}/steps/{iteration}/trace.json", h.chromeTrace)
	mux.HandleFunc("GET /hosts", h.hosts)
	mux.HandleFunc("GET /api/hosts", h.apiHosts)
	mux.HandleFunc("GET /assets/view.js", h.asset("text/javascript; charset=utf-8", js))
	mux.HandleFunc("GET /assets/view.css", h.asset("text/css; charset=utf-8", css))
	return securityHeaders(mux)
}

// securityHeaders: the pages run only their own script (the run's data is
// inline JSON, never executed) and are never framed.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

type pageData struct {
	Title   string
	Refresh int64
	Key     string
	Data    template.JS
	// Inline: the saved page, with its script and style in it.
	Inline bool
	JS     template.JS
	CSS    template.CSS
	Runs   []runSummary
}

func (h *handler) index(w http.ResponseWriter, _ *http.Request) {
	runs := h.store.summaries()
	data, err := json.Marshal(runs)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// template.JS: json.Marshal escapes <, > and & (no "</script>" can
	// appear), and the script type is application/json (never executed).
	render(w, "index.html", pageData{Title: "Training runs", Refresh: h.refresh, Runs: runs, Data: template.JS(data)}) //nolint:gosec // G203: see above
}

// unsafeFilename keeps a saved page's name to characters every file system
// takes.
var unsafeFilename = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (h *handler) run(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	d, ok := h.detail(key)
	if !ok {
		http.Error(w, fmt.Sprintf("no run %q here: it sent no step yet, or it was forgotten (max_runs); the runs: /", key), http.StatusNotFound)
		return
	}
	data, err := json.Marshal(d)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p := pageData{Title: "Run " + key, Refresh: h.refresh, Key: key, Data: template.JS(data)} //nolint:gosec // G203: as in index
	if r.URL.Query().Has("save") {
		p.Inline, p.JS, p.CSS = true, template.JS(h.js), template.CSS(h.css) //nolint:gosec // G203: the embedded assets, no input
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="nemo-run-%s.html"`, unsafeFilename.ReplaceAllString(key, "_")))
		// The saved file opens from disk: its own inline script and
		// style only.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:")
	}
	render(w, "run.html", p)
}

func render(w http.ResponseWriter, name string, p pageData) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

func (h *handler) hosts(w http.ResponseWriter, _ *http.Request) {
	data, err := json.Marshal(h.store.hosts())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, "hosts.html", pageData{Title: "Hosts", Refresh: h.refresh, Data: template.JS(data)}) //nolint:gosec // G203: as in index
}

func (h *handler) apiHosts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.store.hosts())
}

// timelineOf is the step the request names, or an answer saying why not.
func (h *handler) timelineOf(w http.ResponseWriter, r *http.Request) (timelineJSON, bool) {
	it, err := strconv.ParseInt(r.PathValue("iteration"), 10, 64)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the iteration must be an integer"})
		return timelineJSON{}, false
	}
	tl, ok := h.store.timeline(r.PathValue("key"), it)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such run, or no step of that iteration held (max_steps)"})
	}
	return tl, ok
}

func (h *handler) apiTimeline(w http.ResponseWriter, r *http.Request) {
	if tl, ok := h.timelineOf(w, r); ok {
		writeJSON(w, http.StatusOK, tl)
	}
}

// chromeTrace is the step as a Chrome trace-event file, a download.
func (h *handler) chromeTrace(w http.ResponseWriter, r *http.Request) {
	tl, ok := h.timelineOf(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="nemo-run-%s-step-%d.trace.json"`, unsafeFilename.ReplaceAllString(tl.Run, "_"), tl.Iteration))
	writeJSON(w, http.StatusOK, tl.chromeTrace())
}

func (h *handler) apiRuns(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.store.summaries())
}

func (h *handler) apiRun(w http.ResponseWriter, r *http.Request) {
	d, ok := h.detail(r.PathValue("key"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such run"})
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (*handler) asset(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}
