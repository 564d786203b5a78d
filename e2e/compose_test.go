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

	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
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

// collectorPorts are the ports the collector publishes, by the variable that
// sets both the container port and the host port, with its default.
var collectorPorts = []struct {
	env      string
	def      uint32
	loopback bool // always published on 127.0.0.1, whatever NEMO_PUBLISH_ADDR says
}{
	{env: "OTLP_GRPC_PORT", def: 4317},
	{env: "OTLP_HTTP_PORT", def: 4318},
	{env: "HEALTH_CHECK_PORT", def: 13133, loopback: true},
	{env: "OTELCOL_METRICS_PORT", def: 8888, loopback: true},
}

// loadCompose loads and validates a compose file with compose-go, as
// `docker compose` does, with exactly the given variables for interpolation
// (no .env, no process environment, env_file not read: the result does not
// depend on the machine).
func loadCompose(t *testing.T, name string, env map[string]string) *types.Project {
	t.Helper()
	root := testcollector.RepoRoot(t)
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, name)},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(list),
		cli.WithoutEnvironmentResolution,
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		t.Fatalf("%s: project options: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("%s does not load: %v", name, err)
	}
	return p
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

// choiceLine matches a preset offered in a compose file's comments:
// "OTELCOL_CONFIG=/etc/otel/collector-<preset>.yaml".
var choiceLine = regexp.MustCompile(`OTELCOL_CONFIG=(\S+\.yaml)`)

func configChoices(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range choiceLine.FindAllStringSubmatch(string(raw), -1) {
		out = append(out, m[1])
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

// TestComposeConfigChoicesNamePresets: each compose file runs one --config
// that names a preset the image contains; docker-compose.otel.yml switches
// preset with one variable, OTELCOL_CONFIG (compose-go resolves it as docker
// compose does), and its comments offer every preset by the NeMo Lens docs'
// name.
func TestComposeConfigChoicesNamePresets(t *testing.T) {
	root := testcollector.RepoRoot(t)
	exists := func(path string) bool {
		preset, ok := presetFile(path)
		if !ok {
			return false
		}
		_, err := os.Stat(filepath.Join(root, "configs", preset))
		return err == nil
	}
	for _, cf := range composeFiles {
		t.Run(cf.name, func(t *testing.T) {
			got := configArgs(service(t, loadCompose(t, cf.name, nil), "collector").Command)
			if !slices.Equal(got, []string{cf.config}) {
				t.Errorf("%s runs --config %v, want [%s]", cf.name, got, cf.config)
			}
			if !exists(cf.config) {
				t.Errorf("%s: %s names no preset in configs/", cf.name, cf.config)
			}
		})
	}

	t.Run("docker-compose.otel.yml switches preset with OTELCOL_CONFIG", func(t *testing.T) {
		want := presetDir + "collector-honeycomb.yaml"
		p := loadCompose(t, "docker-compose.otel.yml", map[string]string{"OTELCOL_CONFIG": want})
		if got := configArgs(service(t, p, "collector").Command); !slices.Equal(got, []string{want}) {
			t.Errorf("with OTELCOL_CONFIG=%s the collector runs --config %v", want, got)
		}
		offered := map[string]bool{}
		for _, c := range configChoices(t, "docker-compose.otel.yml") {
			if !exists(c) {
				t.Errorf("docker-compose.otel.yml offers OTELCOL_CONFIG=%s, which names no preset in configs/", c)
			}
			preset, _ := presetFile(c)
			offered[preset] = true
		}
		presets, err := filepath.Glob(filepath.Join(root, "configs", "*.yaml"))
		if err != nil || len(presets) == 0 {
			t.Fatalf("no presets in configs/: %v", err)
		}
		for _, p := range presets {
			if !offered[filepath.Base(p)] {
				t.Errorf("configs/%s is not offered as an OTELCOL_CONFIG choice in docker-compose.otel.yml", filepath.Base(p))
			}
		}
	})
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
// NEMO_PUBLISH_ADDR (127.0.0.1 unless set) and its health and metrics ports on
// 127.0.0.1 only; each port is the same number inside the container and on the
// host, and the container gets that number through the preset's variable.
// Jaeger's and Prometheus's UIs are published on 127.0.0.1 only.
func TestComposePortsBindAsIntended(t *testing.T) {
	exposed := dockerfileExposed(t)
	cases := []struct {
		name        string
		env         map[string]string
		publishAddr string
	}{
		{name: "defaults", publishAddr: "127.0.0.1"},
		{name: "overridden", publishAddr: "0.0.0.0", env: map[string]string{
			"NEMO_PUBLISH_ADDR": "0.0.0.0", "OTLP_GRPC_PORT": "5317", "OTLP_HTTP_PORT": "5318",
			"HEALTH_CHECK_PORT": "14133", "OTELCOL_METRICS_PORT": "9888",
		}},
	}
	for _, cf := range composeFiles {
		for _, tc := range cases {
			t.Run(cf.name+"/"+tc.name, func(t *testing.T) {
				p := loadCompose(t, cf.name, tc.env)
				c := service(t, p, "collector")
				byTarget := map[uint32]types.ServicePortConfig{}
				for _, pc := range c.Ports {
					if _, dup := byTarget[pc.Target]; dup {
						t.Errorf("collector publishes container port %d twice", pc.Target)
					}
					byTarget[pc.Target] = pc
				}
				if len(c.Ports) != len(collectorPorts) {
					t.Errorf("collector publishes %d ports, want %d: %+v", len(c.Ports), len(collectorPorts), c.Ports)
				}
				for _, want := range collectorPorts {
					port := want.def
					if v, ok := tc.env[want.env]; ok {
						n, _ := strconv.ParseUint(v, 10, 32)
						port = uint32(n)
					}
					pc, ok := byTarget[port]
					if !ok {
						t.Errorf("%s: container port %d is not published", want.env, port)
						continue
					}
					hostIP := tc.publishAddr
					if want.loopback {
						hostIP = "127.0.0.1"
					}
					if pc.HostIP != hostIP || pc.Published != strconv.Itoa(int(port)) || pc.Protocol != "tcp" {
						t.Errorf("%s: published as %s:%s/%s -> %d, want %s:%d/tcp", want.env, pc.HostIP, pc.Published, pc.Protocol, pc.Target, hostIP, port)
					}
					if v := c.Environment[want.env]; v == nil || *v != strconv.Itoa(int(port)) {
						t.Errorf("%s: the container's %s = %s, want %d (the published port)", want.env, want.env, strPtr(v), port)
					}
					if tc.env == nil && !exposed[port] {
						t.Errorf("%s: port %d is not EXPOSEd by the Dockerfile", want.env, port)
					}
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

// TestComposePrometheusScrapesTheCollector: docker/prometheus.yml, mounted by
// docker-compose.otel.yml, scrapes the collector service on ports its image
// exposes (own metrics 8888, the fanout preset's prometheus exporter 8889).
func TestComposePrometheusScrapesTheCollector(t *testing.T) {
	root := testcollector.RepoRoot(t)
	p := loadCompose(t, "docker-compose.otel.yml", nil)
	prom := service(t, p, "prometheus")
	var cfgPath string
	for _, v := range prom.Volumes {
		if v.Target == "/etc/prometheus/prometheus.yml" {
			cfgPath = v.Source
		}
	}
	if cfgPath != filepath.Join(root, "docker", "prometheus.yml") || !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Fatalf("prometheus must run docker/prometheus.yml: volumes %+v, command %q", prom.Volumes, []string(prom.Command))
	}
	raw, err := os.ReadFile(cfgPath)
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
	exposed := dockerfileExposed(t)
	targets := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = true
				host, port, ok := strings.Cut(tg, ":")
				n, err := strconv.ParseUint(port, 10, 32)
				if _, known := p.Services[host]; !ok || err != nil || !known || !exposed[uint32(n)] {
					t.Errorf("job %s: target %q is not a service:port of the stack", sc.JobName, tg)
				}
			}
		}
	}
	for _, want := range []string{"collector:8888", "collector:8889"} {
		if !targets[want] {
			t.Errorf("docker/prometheus.yml does not scrape %s", want)
		}
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
