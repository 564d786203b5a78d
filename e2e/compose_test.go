// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The container image and compose files (Dockerfile, docker-compose.*.yml,
// .env.example, docker/). The Test*Compose*/TestEnvExample* tests read the
// files only and run in plain `go test`; TestDocker* (docker_test.go) need a Docker daemon and
// the image, and run only under docker/test.sh (`make docker-test`), which sets
// NEMO_DOCKER_TEST=1.

const (
	// imageUID is the numeric user the image runs as (Dockerfile USER).
	imageUID = 10001
	// presetDir is where the image installs configs/*.yaml.
	presetDir = "/etc/otel/"
)

// composeFile describes what each compose file must run.
type composeFile struct {
	name     string
	project  string
	services []string
	// config is the --config= value the collector runs (by default).
	config string
}

var composeFiles = []composeFile{
	{name: "docker-compose.otel.yml", project: "otelcol-nemo", services: []string{"collector", "jaeger", "prometheus"}, config: presetDir + "collector-jaeger.yaml"},
	{name: "docker-compose.weave.yml", project: "otelcol-nemo-weave", services: []string{"collector"}, config: presetDir + "collector-weave.yaml"},
	{name: "docker-compose.honeycomb.yml", project: "otelcol-nemo-honeycomb", services: []string{"collector"}, config: presetDir + "collector-honeycomb.yaml"},
}

// collectorPorts are the ports the collector publishes. Inside the container
// each is the image's port (EXPOSE), pinned in the container's environment by
// the variable the presets listen on; the same variable, from .env or the
// shell, chooses only the host port (docker/prometheus.yml scrapes the
// container's ports, so they must not move).
var collectorPorts = []struct {
	env      string
	port     uint32 // in the container, and the host port by default
	loopback bool   // always published on 127.0.0.1, whatever NEMO_PUBLISH_ADDR says
	only     string // published by this compose file only ("": by every one)
}{
	{env: "OTLP_GRPC_PORT", port: 4317},
	{env: "OTLP_HTTP_PORT", port: 4318},
	{env: "HEALTH_CHECK_PORT", port: 13133, loopback: true},
	{env: "OTELCOL_METRICS_PORT", port: 8888, loopback: true},
	// The run pages (nemo_view) of every preset with step metrics.
	{env: "NEMO_VIEW_PORT", port: 8890, loopback: true},
	// The jaeger and fanout presets' Prometheus exporter.
	{env: "PROMETHEUS_EXPORTER_PORT", port: 8889, loopback: true, only: "docker-compose.otel.yml"},
}

// changedPorts moves every published port away from its default (and OTLP
// off loopback), as a user's .env or shell may.
var changedPorts = map[string]string{
	"NEMO_PUBLISH_ADDR": "0.0.0.0", "OTLP_GRPC_PORT": "5317", "OTLP_HTTP_PORT": "5318",
	"HEALTH_CHECK_PORT": "14133", "OTELCOL_METRICS_PORT": "9888", "PROMETHEUS_EXPORTER_PORT": "9889",
	"NEMO_VIEW_PORT": "9890",
}

// loadCompose loads and validates a compose file with compose-go, as
// `docker compose` does, with exactly the given variables for interpolation
// (no .env, no process environment, env_file not read: the result does not
// depend on the machine).
func loadCompose(t *testing.T, name string, env map[string]string) *types.Project {
	t.Helper()
	root := testcollector.RepoRoot(t)
	return loadComposeAt(t, filepath.Join(root, name), root, env, cli.WithoutEnvironmentResolution)
}

// loadComposeAt loads the compose file at path (the repository's, or an edited
// copy) with relative paths resolved from dir.
func loadComposeAt(t *testing.T, path, dir string, env map[string]string, extra ...cli.ProjectOptionsFn) *types.Project {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{path}, append([]cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(dir),
		cli.WithEnv(list),
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	}, extra...)...)
	if err != nil {
		t.Fatalf("%s: project options: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("%s does not load: %v", path, err)
	}
	return p
}

// loadComposeWithDotEnv loads a copy of a compose file next to a .env holding
// dotenv, as `docker compose` run there does: .env sets the variables the
// file interpolates and, through env_file, the collector's environment (the
// values under environment: win). It returns the project and the directory
// that stands for the repository root.
func loadComposeWithDotEnv(t *testing.T, name string, dotenv map[string]string) (*types.Project, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var env strings.Builder
	for _, k := range slices.Sorted(maps.Keys(dotenv)) {
		fmt.Fprintf(&env, "%s=%s\n", k, dotenv[k])
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	p := loadComposeAt(t, filepath.Join(dir, name), dir, nil,
		cli.WithEnvFiles(filepath.Join(dir, ".env")), cli.WithDotEnv)
	return p, dir
}

// portsCase is one way a user sets (or does not set) the port variables.
type portsCase struct {
	name   string
	env    map[string]string // the variables' values
	dotenv bool              // given in .env (true) or in the shell (false)
}

var portsCases = []portsCase{
	{name: "defaults"},
	{name: "changed in the shell", env: changedPorts},
	{name: "changed in .env", env: changedPorts, dotenv: true},
}

// load loads a compose file as the case sets its variables; the second result
// stands for the repository root (a temporary copy's directory for .env).
func (pc portsCase) load(t *testing.T, name string) (*types.Project, string) {
	t.Helper()
	if pc.dotenv {
		return loadComposeWithDotEnv(t, name, pc.env)
	}
	return loadCompose(t, name, pc.env), testcollector.RepoRoot(t)
}

// hostPort is the host port the case publishes a port variable on.
func (pc portsCase) hostPort(env string, def uint32) string {
	if v, ok := pc.env[env]; ok {
		return v
	}
	return strconv.Itoa(int(def))
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("project %s: %v", p.Name, err)
	}
	return s
}

// TestComposeFilesLoad loads every compose file with compose-go and checks the
// collector service: built from the Dockerfile as otelcol-nemo:local, its
// environment from .env plus the container's fixed values, the /data volume.
func TestComposeFilesLoad(t *testing.T) {
	root := testcollector.RepoRoot(t)
	for _, cf := range composeFiles {
		t.Run(cf.name, func(t *testing.T) {
			p := loadCompose(t, cf.name, nil)
			if p.Name != cf.project {
				t.Errorf("project name %q, want %q", p.Name, cf.project)
			}
			if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, slices.Sorted(slices.Values(cf.services))) {
				t.Errorf("services %v, want %v", got, cf.services)
			}
			c := service(t, p, "collector")
			if c.Image != "otelcol-nemo:local" {
				t.Errorf("collector image %q, want otelcol-nemo:local", c.Image)
			}
			if c.Build == nil {
				t.Fatal("collector has no build section")
			}
			if c.Build.Context != root || c.Build.Dockerfile != "Dockerfile" {
				t.Errorf("collector build context %q, dockerfile %q: want the repository root and Dockerfile", c.Build.Context, c.Build.Dockerfile)
			}
			if _, err := os.Stat(filepath.Join(c.Build.Context, c.Build.Dockerfile)); err != nil {
				t.Errorf("collector build: %v", err)
			}
			if got := configArgs(c.Command); !slices.Equal(got, []string{cf.config}) {
				t.Errorf("collector command %q: want exactly one --config=%s", []string(c.Command), cf.config)
			}

			if len(c.EnvFiles) != 1 || c.EnvFiles[0].Path != filepath.Join(root, ".env") || bool(c.EnvFiles[0].Required) {
				t.Errorf("collector env_file %+v: want .env, required: false", c.EnvFiles)
			}
			for k, want := range map[string]string{
				"OTELCOL_LISTEN_HOST": "0.0.0.0",
				"NEMO_TELEMETRY_DIR":  "/data/telemetry",
				"NEMO_QUEUE_DIR":      "/data/queue",
			} {
				if v := c.Environment[k]; v == nil || *v != want {
					t.Errorf("collector environment %s = %v, want %q", k, strPtr(v), want)
				}
			}

			var data *types.ServiceVolumeConfig
			for i, v := range c.Volumes {
				if v.Target == "/data" {
					data = &c.Volumes[i]
				}
			}
			if data == nil || data.Type != types.VolumeTypeVolume || data.ReadOnly {
				t.Fatalf("collector volumes %+v: want a writable named volume at /data", c.Volumes)
			}
			if _, ok := p.Volumes[data.Source]; !ok {
				t.Errorf("volume %q is not declared at the top level", data.Source)
			}
			// The repository's presets over the image's, read-only: an edit
			// needs no rebuild.
			mounted := false
			for _, v := range c.Volumes {
				if v.Target == presetDir+"configs" {
					mounted = v.Type == types.VolumeTypeBind && v.Source == filepath.Join(root, "configs") && v.ReadOnly
				}
			}
			if !mounted {
				t.Errorf("collector volumes %+v: want ./configs bound read-only at %sconfigs", c.Volumes, presetDir)
			}
			if c.StopGracePeriod == nil || time.Duration(*c.StopGracePeriod) < 10*time.Second {
				t.Errorf("collector stop_grace_period %v: want at least 10s to flush on stop", c.StopGracePeriod)
			}
			// The collector must start alone: `up collector` never starts (or
			// pulls) another service.
			if len(c.DependsOn) != 0 {
				t.Errorf("collector depends_on %v: it must start without the other services", slices.Collect(maps.Keys(c.DependsOn)))
			}
		})
	}
}

func strPtr(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return strconv.Quote(*s)
}

// configArgs returns the --config= values of a command.
func configArgs(cmd []string) []string {
	var out []string
	for _, a := range cmd {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			out = append(out, v)
		}
	}
	return out
}

// choiceLine matches a preset docker-compose.otel.yml offers under the
// collector's command: a commented-out "- --config=/etc/otel/collector-<preset>.yaml"
// that a user uncomments (as the NeMo Lens page says), or sets as
// OTELCOL_CONFIG. Groups: indent, the list item, its path, the rest of the line.
var choiceLine = regexp.MustCompile(`(?m)^([ \t]*)#[ \t]*(- --config=(/\S+\.yaml))(.*)$`)

// activeConfigLine is the collector's one active --config line, which follows
// OTELCOL_CONFIG.
var activeConfigLine = regexp.MustCompile(`(?m)^([ \t]*)(- --config=\$\{OTELCOL_CONFIG:-[^}]*\})[ \t]*$`)

func configChoices(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range choiceLine.FindAllStringSubmatch(string(raw), -1) {
		out = append(out, m[3])
	}
	return out
}

// toggle is the compose file as a user leaves it who follows the page:
// choice's line uncommented, the active --config line commented out.
func toggle(t *testing.T, raw []byte, choice string) []byte {
	t.Helper()
	if n := len(activeConfigLine.FindAll(raw, -1)); n != 1 {
		t.Fatalf("%d active --config=${OTELCOL_CONFIG:-...} lines, want 1", n)
	}
	out := activeConfigLine.ReplaceAll(raw, []byte("$1# $2"))
	found := 0
	out = choiceLine.ReplaceAllFunc(out, func(line []byte) []byte {
		m := choiceLine.FindSubmatch(line)
		if string(m[3]) != choice {
			return line
		}
		found++
		return slices.Concat(m[1], m[2], m[4])
	})
	if found != 1 {
		t.Fatalf("%s is offered %d times, want once", choice, found)
	}
	return out
}

// presetFile maps a path in the image to the preset in configs/ it names:
// /etc/otel/X.yaml and /etc/otel/collector-X.yaml are configs/X.yaml, and
// the default /etc/otel/collector.yaml is configs/file.yaml.
func presetFile(path string) (string, bool) {
	name, ok := strings.CutPrefix(path, presetDir)
	if !ok || strings.Contains(name, "/") || !strings.HasSuffix(name, ".yaml") {
		return "", false
	}
	if name == "collector.yaml" {
		return "file.yaml", true
	}
	return strings.TrimPrefix(name, "collector-"), true
}

// imageLink matches docker/build.sh's links to a preset: ln -s "configs/$name"
// "$CTX/etc-otel/collector-$name", or a literal preset such as collector.yaml.
var imageLink = regexp.MustCompile(`(?m)^\s*ln -s "?configs/([^"\s/]+)"? "?\$CTX/etc-otel/([^"\s/]+)"?\s*$`)

// imageNames returns every /etc/otel/ path the image names a preset by, and the
// file of configs/ it is, as docker/build.sh makes them (for each preset, and
// the literal links).
func imageNames(t *testing.T) map[string]string {
	t.Helper()
	root := testcollector.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docker", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	presets, err := filepath.Glob(filepath.Join(root, "configs", "*.yaml"))
	if err != nil || len(presets) == 0 {
		t.Fatalf("no presets in configs/: %v", err)
	}
	out := map[string]string{}
	for _, m := range imageLink.FindAllStringSubmatch(string(raw), -1) {
		if m[1] != "$name" {
			out[presetDir+m[2]] = m[1]
			continue
		}
		for _, p := range presets {
			name := filepath.Base(p)
			out[presetDir+strings.ReplaceAll(m[2], "$name", name)] = name
		}
	}
	if len(out) <= len(presets) {
		t.Fatalf("docker/build.sh: found %d preset names for %d presets: the scan of its ln -s lines is broken", len(out), len(presets))
	}
	return out
}

// TestComposeConfigChoicesNamePresets: each compose file runs one --config
// that names a preset the image contains. docker-compose.otel.yml offers
// every preset by the NeMo Lens docs' name in commented-out --config lines
// under the collector's command, and switches to each both ways: with
// OTELCOL_CONFIG (ours), and by uncommenting its line and commenting out the
// active one (the page's), whatever OTELCOL_CONFIG then says.
func TestComposeConfigChoicesNamePresets(t *testing.T) {
	root := testcollector.RepoRoot(t)
	names := imageNames(t)
	exists := func(path string) bool {
		preset, ok := names[path]
		if !ok {
			return false
		}
		fi, err := os.Stat(filepath.Join(root, "configs", preset))
		return err == nil && fi.Mode().IsRegular()
	}
	for _, cf := range composeFiles {
		t.Run(cf.name, func(t *testing.T) {
			got := configArgs(service(t, loadCompose(t, cf.name, nil), "collector").Command)
			if !slices.Equal(got, []string{cf.config}) {
				t.Errorf("%s runs --config %v, want [%s]", cf.name, got, cf.config)
			}
			if !exists(cf.config) {
				t.Errorf("%s: %s is not a name the image gives a preset of configs/", cf.name, cf.config)
			}
		})
	}

	const name = "docker-compose.otel.yml"
	raw, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	choices := configChoices(t, name)
	offered := map[string]bool{}
	for _, choice := range choices {
		preset := names[choice]
		offered[preset] = true
		t.Run("OTELCOL_CONFIG="+choice, func(t *testing.T) {
			if !exists(choice) {
				t.Fatalf("%s offers %s, which is not a name the image gives a preset of configs/", name, choice)
			}
			p := loadCompose(t, name, map[string]string{"OTELCOL_CONFIG": choice})
			if got := configArgs(service(t, p, "collector").Command); !slices.Equal(got, []string{choice}) {
				t.Errorf("with OTELCOL_CONFIG=%s the collector runs --config %v", choice, got)
			}
		})
		t.Run("uncommented "+choice, func(t *testing.T) {
			edited := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(edited, toggle(t, raw, choice), 0o600); err != nil {
				t.Fatal(err)
			}
			// A leftover OTELCOL_CONFIG must not matter once the line is edited.
			other := presetDir + "collector-file.yaml"
			if choice == other {
				other = presetDir + "collector-jaeger.yaml"
			}
			p := loadComposeAt(t, edited, root, map[string]string{"OTELCOL_CONFIG": other}, cli.WithoutEnvironmentResolution)
			if got := configArgs(service(t, p, "collector").Command); !slices.Equal(got, []string{choice}) {
				t.Errorf("uncommenting --config=%s (and commenting out the active line), the collector runs --config %v", choice, got)
			}
			if !exists(choice) {
				t.Errorf("%s is not a name the image gives a preset of configs/", choice)
			}
		})
	}
	presets := presetNames(t)
	for _, preset := range presets {
		if !offered[preset] {
			t.Errorf("configs/%s is not offered as a --config line (and OTELCOL_CONFIG value) in %s", preset, name)
		}
	}
	if len(choices) != len(presets) {
		t.Errorf("%s offers %d --config lines for %d presets: %v", name, len(choices), len(presets), choices)
	}
}

// exactVersion is an exact release tag: 1.76.0, v3.5.0 (no latest, no 1, no 1.76).
var exactVersion = regexp.MustCompile(`^v?\d+\.\d+\.\d+$`)

// TestComposeImagesArePinned: every image that is pulled has an exact version
// tag (or a digest), and Jaeger's and Prometheus's can be overridden by env.
// The collector's own image is built locally (otelcol-nemo:local).
func TestComposeImagesArePinned(t *testing.T) {
	for _, cf := range composeFiles {
		p := loadCompose(t, cf.name, nil)
		for _, name := range slices.Sorted(maps.Keys(p.Services)) {
			s := p.Services[name]
			if s.Build != nil {
				if s.Image != "otelcol-nemo:local" {
					t.Errorf("%s: service %s is built locally but tagged %q, want otelcol-nemo:local", cf.name, name, s.Image)
				}
				continue
			}
			if err := checkPinned(s.Image); err != nil {
				t.Errorf("%s: service %s: %v", cf.name, name, err)
			}
		}
	}

	overrides := map[string]string{
		"JAEGER_IMAGE":     "mirror.internal/jaegertracing/all-in-one:1.76.0",
		"PROMETHEUS_IMAGE": "mirror.internal/prom/prometheus:v3.5.0",
	}
	p := loadCompose(t, "docker-compose.otel.yml", overrides)
	if got := service(t, p, "jaeger").Image; got != overrides["JAEGER_IMAGE"] {
		t.Errorf("JAEGER_IMAGE does not override the jaeger image: got %q", got)
	}
	if got := service(t, p, "prometheus").Image; got != overrides["PROMETHEUS_IMAGE"] {
		t.Errorf("PROMETHEUS_IMAGE does not override the prometheus image: got %q", got)
	}
}

func checkPinned(image string) error {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	if _, ok := ref.(reference.Digested); ok {
		return nil
	}
	tagged, ok := ref.(reference.Tagged)
	if !ok {
		return fmt.Errorf("image %q has no tag: pin an exact version", image)
	}
	if !exactVersion.MatchString(tagged.Tag()) {
		return fmt.Errorf("image %q: tag %q is not an exact version (want e.g. 1.76.0 or v3.5.0)", image, tagged.Tag())
	}
	return nil
}

// TestComposePortsBindAsIntended: the collector publishes OTLP on
// NEMO_PUBLISH_ADDR (127.0.0.1 unless set) and its health, metrics and
// Prometheus exporter ports on 127.0.0.1 only. Inside the container every port
// is the image's (EXPOSEd), pinned by the variable the presets listen on,
// whether the variables are left at their defaults or changed in the shell or
// in .env (whose env_file copy must not move the container's port); the
// variable moves only the host port. Jaeger's and Prometheus's UIs are
// published on 127.0.0.1 only.
func TestComposePortsBindAsIntended(t *testing.T) {
	exposed := dockerfileExposed(t)
	for _, cf := range composeFiles {
		for _, tc := range portsCases {
			t.Run(cf.name+"/"+tc.name, func(t *testing.T) {
				p, _ := tc.load(t, cf.name)
				c := service(t, p, "collector")
				byTarget := map[uint32]types.ServicePortConfig{}
				for _, pc := range c.Ports {
					if _, dup := byTarget[pc.Target]; dup {
						t.Errorf("collector publishes container port %d twice", pc.Target)
					}
					byTarget[pc.Target] = pc
				}
				publishAddr := "127.0.0.1"
				if v, ok := tc.env["NEMO_PUBLISH_ADDR"]; ok {
					publishAddr = v
				}
				want := 0
				for _, port := range collectorPorts {
					if port.only != "" && port.only != cf.name {
						continue
					}
					want++
					if !exposed[port.port] {
						t.Errorf("%s: port %d is not EXPOSEd by the Dockerfile", port.env, port.port)
					}
					pc, ok := byTarget[port.port]
					if !ok {
						t.Errorf("%s: container port %d is not published", port.env, port.port)
						continue
					}
					hostIP := publishAddr
					if port.loopback {
						hostIP = "127.0.0.1"
					}
					host := tc.hostPort(port.env, port.port)
					if pc.HostIP != hostIP || pc.Published != host || pc.Protocol != "tcp" {
						t.Errorf("%s: published as %s:%s/%s -> %d, want %s:%s/tcp -> %d", port.env, pc.HostIP, pc.Published, pc.Protocol, pc.Target, hostIP, host, port.port)
					}
					if v := c.Environment[port.env]; v == nil || *v != strconv.Itoa(int(port.port)) {
						t.Errorf("%s: the container's %s = %s, want %d (the image's port, whatever the host port)", port.env, port.env, strPtr(v), port.port)
					}
				}
				if len(c.Ports) != want {
					t.Errorf("collector publishes %d ports, want %d: %+v", len(c.Ports), want, c.Ports)
				}
				for name, s := range p.Services {
					if name == "collector" {
						continue
					}
					for _, pc := range s.Ports {
						if pc.HostIP != "127.0.0.1" {
							t.Errorf("service %s publishes %d on %q, want 127.0.0.1", name, pc.Target, pc.HostIP)
						}
					}
				}
			})
		}
	}
}

// dockerfileExposed returns the ports of the Dockerfile's EXPOSE lines.
func dockerfileExposed(t *testing.T) map[uint32]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]bool{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.EqualFold(fields[0], "EXPOSE") {
			continue
		}
		for _, f := range fields[1:] {
			n, err := strconv.ParseUint(strings.TrimSuffix(f, "/tcp"), 10, 32)
			if err != nil {
				t.Fatalf("Dockerfile: EXPOSE %q: %v", f, err)
			}
			out[uint32(n)] = true
		}
	}
	for _, want := range []uint32{4317, 4318, 13133, 8888, 8889} {
		if !out[want] {
			t.Errorf("Dockerfile does not EXPOSE %d", want)
		}
	}
	return out
}

// scrapeJobs are docker/prometheus.yml's jobs, by the variable whose port each
// scrapes: the collector's own metrics (every preset) and the jaeger and
// fanout presets' Prometheus exporter.
var scrapeJobs = map[string]struct {
	env     string
	presets []string // the presets that listen on env's port
}{
	"otelcol-nemo": {env: "OTELCOL_METRICS_PORT"},
	"training":     {env: "PROMETHEUS_EXPORTER_PORT", presets: []string{"jaeger.yaml", "fanout.yaml"}},
}

// TestComposePrometheusScrapesTheCollector: docker/prometheus.yml, mounted by
// docker-compose.otel.yml, scrapes the collector service on the ports it
// listens on inside the container (the value its environment gives the
// presets' variable), with the variables at their defaults and changed in
// the shell or .env (Prometheus cannot follow a variable, so the container's
// ports must stay put while the host's move), and the host reaches the same
// port on 127.0.0.1 at the variable's value.
func TestComposePrometheusScrapesTheCollector(t *testing.T) {
	root := testcollector.RepoRoot(t)
	for job, sj := range scrapeJobs {
		presets := sj.presets
		if presets == nil {
			presets = presetNames(t)
		}
		for _, preset := range presets {
			raw, err := os.ReadFile(filepath.Join(root, "configs", preset))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), "${env:"+sj.env+":-") {
				t.Errorf("job %s: configs/%s does not listen on ${env:%s}", job, preset, sj.env)
			}
		}
	}
	exposed := dockerfileExposed(t)
	for _, tc := range portsCases {
		t.Run(tc.name, func(t *testing.T) {
			p, dir := tc.load(t, "docker-compose.otel.yml")
			prom := service(t, p, "prometheus")
			var cfgPath string
			for _, v := range prom.Volumes {
				if v.Target == "/etc/prometheus/prometheus.yml" {
					cfgPath = v.Source
				}
			}
			if cfgPath != filepath.Join(dir, "docker", "prometheus.yml") || !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
				t.Fatalf("prometheus must run docker/prometheus.yml: volumes %+v, command %q", prom.Volumes, []string(prom.Command))
			}
			raw, err := os.ReadFile(filepath.Join(root, "docker", "prometheus.yml"))
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				ScrapeConfigs []struct {
					JobName       string `yaml:"job_name"`
					StaticConfigs []struct {
						Targets []string `yaml:"targets"`
					} `yaml:"static_configs"`
				} `yaml:"scrape_configs"`
			}
			if err := yaml.Unmarshal(raw, &cfg); err != nil {
				t.Fatalf("docker/prometheus.yml: %v", err)
			}
			c := service(t, p, "collector")
			published := map[uint32]types.ServicePortConfig{}
			for _, pc := range c.Ports {
				published[pc.Target] = pc
			}
			scraped := map[string]bool{}
			for _, sc := range cfg.ScrapeConfigs {
				sj, ok := scrapeJobs[sc.JobName]
				if !ok {
					t.Errorf("docker/prometheus.yml: job %s scrapes nothing this test knows", sc.JobName)
					continue
				}
				scraped[sc.JobName] = true
				var targets []string
				for _, st := range sc.StaticConfigs {
					targets = append(targets, st.Targets...)
				}
				listen := c.Environment[sj.env]
				if listen == nil {
					t.Errorf("job %s: the collector's environment does not set %s", sc.JobName, sj.env)
					continue
				}
				if want := "collector:" + *listen; !slices.Equal(targets, []string{want}) {
					t.Errorf("job %s scrapes %v, but the collector listens on %s (%s=%s in its environment)", sc.JobName, targets, want, sj.env, *listen)
				}
				n, err := strconv.ParseUint(*listen, 10, 32)
				if err != nil || !exposed[uint32(n)] {
					t.Errorf("job %s: %s=%s is not a port the image exposes", sc.JobName, sj.env, *listen)
					continue
				}
				pc, ok := published[uint32(n)]
				if host := tc.hostPort(sj.env, uint32(n)); !ok || pc.HostIP != "127.0.0.1" || pc.Published != host {
					t.Errorf("job %s: the collector's port %d is published as %+v, want 127.0.0.1:%s (%s on the host)", sc.JobName, n, pc, host, sj.env)
				}
			}
			for job := range scrapeJobs {
				if !scraped[job] {
					t.Errorf("docker/prometheus.yml has no job %s", job)
				}
			}
		})
	}
}

// Variables in presets (${env:X}, ${required:X}, ${otlpheaders:X}, ${X}) and
// in compose files (${X}, ${X:-default}).
var (
	presetVar  = regexp.MustCompile(`\$\{(?:(env|required|otlpheaders):)?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}`)
	composeVar = regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)`)
	envLine    = regexp.MustCompile(`^#?\s*([A-Za-z_][A-Za-z0-9_]*)=`)
)

// TestEnvExampleListsEveryVariable: .env.example names (set or commented out)
// every variable any preset in configs/ reads and every variable the compose
// files interpolate, and parses as a .env file.
func TestEnvExampleListsEveryVariable(t *testing.T) {
	root := testcollector.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dotenv.Parse(bytes.NewReader(raw)); err != nil {
		t.Fatalf(".env.example does not parse as a .env file: %v", err)
	}
	listed := map[string]bool{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if m := envLine.FindStringSubmatch(line); m != nil {
			listed[m[1]] = true
		}
	}

	need := map[string]string{} // variable -> first file that reads it
	presets, _ := filepath.Glob(filepath.Join(root, "configs", "*.yaml"))
	if len(presets) == 0 {
		t.Fatal("no presets in configs/")
	}
	for _, p := range presets {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range presetVar.FindAllStringSubmatch(string(b), -1) {
			if _, ok := need[m[2]]; !ok {
				need[m[2]] = "configs/" + filepath.Base(p)
			}
		}
	}
	for _, cf := range composeFiles {
		b, err := os.ReadFile(filepath.Join(root, cf.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range composeVar.FindAllStringSubmatch(string(b), -1) {
			if _, ok := need[m[2]]; !ok {
				need[m[2]] = cf.name
			}
		}
	}
	if len(need) < 10 {
		t.Fatalf("found only %d variables in the presets and compose files: the scan is broken", len(need))
	}
	for _, v := range slices.Sorted(maps.Keys(need)) {
		if !listed[v] {
			t.Errorf(".env.example does not list %s (read by %s)", v, need[v])
		}
	}
}
