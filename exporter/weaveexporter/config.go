// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

const (
	// defaultEndpoint is Weave's multi-tenant OTLP traces URL.
	defaultEndpoint = "https://trace.wandb.ai/otel/v1/traces"
	// dedicatedPath is where dedicated and self-managed W&B deployments serve
	// Weave's OTLP endpoint: note the extra /traces in front of /otel.
	dedicatedPath = "/traces/otel/v1/traces"
	tracesSuffix  = "/v1/traces"

	defaultMaxRequestBytes = 4 << 20
	minMaxRequestBytes     = 1 << 10
)

// The configuration's errors. Each message wraps one of them with the value
// it got (never the API key), so that it names the key and the fix while the
// tests match the kind with errors.Is.
var (
	errAuthMode          = errors.New("auth_mode must be header or basic")
	errDeployment        = errors.New("deployment must be multi_tenant or dedicated")
	errNoAPIKey          = errors.New("api_key is required: set it to ${env:WANDB_API_KEY} (a key from https://wandb.ai/authorize, or from your W&B deployment)")
	errAPIKeySpaces      = errors.New("api_key contains whitespace or control characters (a trailing newline from a secret file?); the key is not shown")
	errSurroundingSpaces = errors.New("must not start or end with spaces")
	errSlashInName       = errors.New("must be a bare W&B name without '/'")
	errMaxRequestBytes   = fmt.Errorf("max_request_bytes must be at least %d", minMaxRequestBytes)
	errCompression       = errors.New("compression must be gzip, deflate or none: Weave accepts only Content-Encoding gzip or deflate")

	errHostWithoutDedicated  = errors.New("host is only used with deployment: dedicated; add deployment: dedicated, or remove host and put the full URL in endpoint")
	errNoHost                = errors.New("host is required with deployment: dedicated, e.g. host: acme.wandb.io")
	errBadHost               = errors.New("host must be a bare host name such as acme.wandb.io (optionally with :port), without scheme or path")
	errEndpointWithDedicated = errors.New("endpoint cannot be combined with deployment: dedicated")
	errNoEndpoint            = errors.New("endpoint is required: Weave's multi-tenant URL is " + defaultEndpoint)
	errEndpointURL           = errors.New("endpoint is not a valid URL")
	errEndpointScheme        = errors.New("endpoint must start with https:// (or http:// for a local proxy)")
	errEndpointNoHost        = errors.New("endpoint has no host")
	errEndpointCredentials   = errors.New("endpoint must not contain credentials: put the key in api_key")
	errDoubleTracesSuffix    = errors.New("ends in /v1/traces/v1/traces: the weave exporter sends to endpoint as given " +
		"(otlp_http's endpoint is a base that gets /v1/traces appended, this one is not); remove the repeated /v1/traces, e.g. " + defaultEndpoint)
	errNoTracesSuffix = errors.New("does not end in /v1/traces: the weave exporter sends to endpoint as given, so it must be the full traces URL, e.g. " +
		defaultEndpoint + ", or use deployment: dedicated with host for https://<host>" + dedicatedPath)
	errNoTracesPrefix = errors.New("lacks the /traces prefix that dedicated and self-managed W&B deployments need")
)

// AuthMode says how the API key is sent to Weave.
type AuthMode string

const (
	// AuthModeHeader sends the key in the `wandb-api-key` header.
	AuthModeHeader AuthMode = "header"
	// AuthModeBasic sends `Authorization: Basic base64("api:<key>")`.
	AuthModeBasic AuthMode = "basic"
)

// Validate refuses unknown modes.
func (m AuthMode) Validate() error {
	switch m {
	case AuthModeHeader, AuthModeBasic:
		return nil
	default:
		return fmt.Errorf("%w, got %q", errAuthMode, string(m))
	}
}

// UnmarshalText refuses unknown modes while the configuration is read.
func (m *AuthMode) UnmarshalText(text []byte) error {
	mode := AuthMode(text)
	if err := mode.Validate(); err != nil {
		return err
	}
	*m = mode
	return nil
}

// Deployment says which kind of W&B deployment receives the traces.
type Deployment string

const (
	// DeploymentMultiTenant is W&B's multi-tenant cloud: the URL is `endpoint`.
	DeploymentMultiTenant Deployment = "multi_tenant"
	// DeploymentDedicated is a dedicated-cloud or self-managed W&B: the URL is
	// https://<host>/traces/otel/v1/traces.
	DeploymentDedicated Deployment = "dedicated"
)

// Validate refuses unknown deployments. Empty, as a Config built in code may
// leave it, means multi_tenant.
func (d Deployment) Validate() error {
	switch d {
	case DeploymentMultiTenant, DeploymentDedicated, "":
		return nil
	default:
		return d.unknown()
	}
}

// UnmarshalText refuses unknown deployments while the configuration is read,
// and an empty one too: there it is a setting left blank.
func (d *Deployment) UnmarshalText(text []byte) error {
	dep := Deployment(text)
	if dep == "" {
		return dep.unknown()
	}
	if err := dep.Validate(); err != nil {
		return err
	}
	*d = dep
	return nil
}

func (d Deployment) unknown() error {
	return fmt.Errorf("%w, got %q", errDeployment, string(d))
}

// Config defines the configuration of the weave exporter.
type Config struct {
	// ClientConfig holds the HTTP client settings (endpoint, timeout,
	// compression, TLS, proxy, headers, ...). Unlike otlp_http, endpoint is
	// the full traces URL: nothing is appended to it.
	ClientConfig confighttp.ClientConfig `mapstructure:",squash"`
	// QueueConfig is the exporterhelper sending queue.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is the exporterhelper retry policy, used for 429/502/503/504
	// and network errors. A Retry-After from Weave lengthens the wait. Its
	// max_elapsed_time is the retry window: a request still failing past it
	// is dead-lettered (0: retry until Weave takes it).
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// DeadLetter says where what Weave does not take is kept: a request
	// leaves the queue only delivered or dead-lettered.
	DeadLetter deadletter.Config `mapstructure:"dead_letter"`

	// Deployment is multi_tenant (default: the URL is endpoint) or dedicated
	// (the URL is https://<host>/traces/otel/v1/traces).
	Deployment Deployment `mapstructure:"deployment"`
	// Host is the host name of a dedicated or self-managed W&B deployment,
	// e.g. acme.wandb.io. Only used with deployment: dedicated.
	Host string `mapstructure:"host"`

	// APIKey is the W&B API key, usually ${env:WANDB_API_KEY}. Required.
	APIKey configopaque.String `mapstructure:"api_key"`
	// AuthMode is header (wandb-api-key header, default) or basic
	// (Authorization: Basic api:<key>). Not named `auth`: that key belongs to
	// the HTTP client's authenticator extension setting.
	AuthMode AuthMode `mapstructure:"auth_mode"`

	// Entity is set as wandb.entity on resources that do not carry one.
	Entity string `mapstructure:"entity"`
	// Project is set as wandb.project on resources that do not carry one.
	Project string `mapstructure:"project"`

	// RunIDAttribute names a resource attribute holding the W&B run id. When
	// set, spans without wandb.wb_run_id get it from that attribute, which
	// links them to the run in the W&B UI. Empty (default) disables linking.
	RunIDAttribute string `mapstructure:"run_id_attribute"`

	// MaxRequestBytes bounds the uncompressed protobuf body of one request.
	// Bigger batches are split; a 413 from Weave halves the request again.
	MaxRequestBytes int `mapstructure:"max_request_bytes"`
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration. Error messages never include the API key.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.APIKey == "" {
		errs = append(errs, errNoAPIKey)
	} else if strings.ContainsFunc(string(cfg.APIKey), func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		errs = append(errs, errAPIKeySpaces)
	}
	if err := cfg.AuthMode.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := cfg.Deployment.Validate(); err != nil {
		errs = append(errs, err)
	} else if _, err := cfg.tracesURL(); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("entity", cfg.Entity); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("project", cfg.Project); err != nil {
		errs = append(errs, err)
	}
	if cfg.RunIDAttribute != strings.TrimSpace(cfg.RunIDAttribute) {
		errs = append(errs, fmt.Errorf("run_id_attribute %w, got %q", errSurroundingSpaces, cfg.RunIDAttribute))
	}
	if cfg.MaxRequestBytes < minMaxRequestBytes {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxRequestBytes, cfg.MaxRequestBytes))
	}
	switch cfg.ClientConfig.Compression {
	case configcompression.TypeGzip, configcompression.TypeDeflate, "", "none":
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errCompression, cfg.ClientConfig.Compression))
	}
	return errors.Join(errs...)
}

// checkName refuses entity/project values that cannot be one path segment of
// Weave's project id "<entity>/<project>".
func checkName(key, value string) error {
	if strings.Contains(value, "/") {
		return fmt.Errorf("%s %w, got %q", key, errSlashInName, value)
	}
	if value != strings.TrimSpace(value) {
		return fmt.Errorf("%s %w, got %q", key, errSurroundingSpaces, value)
	}
	return nil
}

// tracesURL returns the URL spans are posted to, or an error that explains
// which setting is wrong and what it should look like.
func (cfg *Config) tracesURL() (string, error) {
	switch cfg.Deployment {
	case DeploymentMultiTenant, "":
		if cfg.Host != "" {
			return "", errHostWithoutDedicated
		}
		return checkEndpoint(cfg.ClientConfig.Endpoint)
	case DeploymentDedicated:
		if cfg.Host == "" {
			return "", errNoHost
		}
		if cfg.ClientConfig.Endpoint != "" && cfg.ClientConfig.Endpoint != defaultEndpoint {
			return "", fmt.Errorf("%w, which sends to https://%s%s; remove endpoint, or remove deployment and host", errEndpointWithDedicated, cfg.Host, dedicatedPath)
		}
		u, err := url.Parse("https://" + cfg.Host)
		if err != nil || u.Host != cfg.Host || u.User != nil {
			return "", fmt.Errorf("%w, got %q", errBadHost, cfg.Host)
		}
		return "https://" + cfg.Host + dedicatedPath, nil
	default:
		return "", cfg.Deployment.unknown()
	}
}

// checkEndpoint validates a full traces URL given in endpoint.
func checkEndpoint(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errNoEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errEndpointURL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("%w, got %q", errEndpointScheme, endpoint)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: %q", errEndpointNoHost, endpoint)
	}
	if u.User != nil {
		return "", errEndpointCredentials
	}
	if strings.HasSuffix(u.Path, tracesSuffix+tracesSuffix) {
		return "", fmt.Errorf("endpoint %q %w", endpoint, errDoubleTracesSuffix)
	}
	if !strings.HasSuffix(u.Path, tracesSuffix) {
		return "", fmt.Errorf("endpoint %q %w", endpoint, errNoTracesSuffix)
	}
	if strings.HasSuffix(u.Hostname(), ".wandb.io") && !strings.HasSuffix(u.Path, dedicatedPath) {
		return "", fmt.Errorf("endpoint %q %w: use https://%s%s, or deployment: dedicated with host: %s", endpoint, errNoTracesPrefix, u.Host, dedicatedPath, u.Host)
	}
	return endpoint, nil
}
