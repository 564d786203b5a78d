// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
)

// Config is the nemo_view exporter's configuration.
type Config struct {
	// ServerConfig is where the pages are served (endpoint, tls, auth), as
	// the prometheus exporter serves its scrape endpoint.
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// Enabled false serves nothing and keeps nothing: the pipelines feeding
	// the exporter stay valid, so that a switch (NEMO_VIEW) turns it off.
	Enabled bool `mapstructure:"enabled"`
	// MaxRuns is the number of runs kept; the run updated longest ago goes
	// first.
	MaxRuns int `mapstructure:"max_runs"`
	// MaxSteps is the number of iterations kept per run, the latest.
	MaxSteps int `mapstructure:"max_steps"`
	// MaxRanks is the number of ranks kept per run (and worker group), the
	// first seen; the page says how many more there were.
	MaxRanks int `mapstructure:"max_ranks"`
	// RelativeThreshold and IndividualThreshold mark a rank step as a
	// straggler on the page: nemo_steps' and rank_strategy's thresholds
	// (the presets pass all three the same variables).
	RelativeThreshold   float64 `mapstructure:"relative_threshold"`
	IndividualThreshold float64 `mapstructure:"individual_threshold"`
	// RefreshInterval is how often an open page fetches the run again.
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// Storage, when set, is a storage extension (file_storage) the runs
	// are saved to every SaveInterval and at shutdown, and read back from
	// at start: the pages survive a collector restart.
	Storage      *component.ID `mapstructure:"storage"`
	SaveInterval time.Duration `mapstructure:"save_interval"`
	// Hosts is the fleet's page (/hosts): every host across the runs.
	Hosts HostsConfig `mapstructure:"hosts"`
	// DeadLetterDirectory, when set, is the runs' directory whose
	// <run>/dead-letters/ the network exporters (nemo_otlp, spool) write
	// what their destination did not take to: a run page lists its files.
	DeadLetterDirectory string `mapstructure:"dead_letter_directory"`
}

// HostsConfig sets what /hosts counts and when a host goes on its drain
// list.
type HostsConfig struct {
	// Window is how far back a host's counts go.
	Window time.Duration `mapstructure:"window"`
	// MaxHosts is the number of hosts tracked, the first seen; the page
	// counts the others.
	MaxHosts int `mapstructure:"max_hosts"`
	// DrainAfterRuns puts a host on the drain list once it cost this many
	// runs in the window: a straggler in StragglerStepsPerRun of a run's
	// steps or more, the culprit of a stall, or lost in a stall.
	DrainAfterRuns       int   `mapstructure:"drain_after_runs"`
	StragglerStepsPerRun int64 `mapstructure:"straggler_steps_per_run"`
}

// Validate checks the limits and thresholds, naming the key to fix.
func (c *Config) Validate() error {
	var errs []error
	if c.Enabled && c.ServerConfig.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint: empty; set host:port to serve the pages on (e.g. localhost:8890), or enabled: false"))
	}
	for _, l := range []struct {
		key string
		v   int
	}{{"max_runs", c.MaxRuns}, {"max_steps", c.MaxSteps}, {"max_ranks", c.MaxRanks}} {
		if l.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %d; must be positive (the page's memory is bounded by max_runs x max_steps x max_ranks)", l.key, l.v))
		}
	}
	for _, th := range []struct {
		key string
		v   float64
	}{{"relative_threshold", c.RelativeThreshold}, {"individual_threshold", c.IndividualThreshold}} {
		if th.v < 0 || th.v > 1 {
			errs = append(errs, fmt.Errorf("%s: %v; must be between 0 (off) and 1, as in nemo_steps", th.key, th.v))
		}
	}
	if c.Hosts.Window < time.Minute {
		errs = append(errs, fmt.Errorf("hosts::window: %s; must be at least 1m (a host's counts go back that far)", c.Hosts.Window))
	}
	for _, l := range []struct {
		key string
		v   int64
	}{{"hosts::max_hosts", int64(c.Hosts.MaxHosts)}, {"hosts::drain_after_runs", int64(c.Hosts.DrainAfterRuns)}, {"hosts::straggler_steps_per_run", c.Hosts.StragglerStepsPerRun}} {
		if l.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %d; must be positive", l.key, l.v))
		}
	}
	if c.Storage != nil && c.SaveInterval < time.Second {
		errs = append(errs, fmt.Errorf("save_interval: %s; must be at least 1s (each save writes every run that changed)", c.SaveInterval))
	}
	if c.RefreshInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("refresh_interval: %s; must be at least 100ms", c.RefreshInterval))
	}
	return errors.Join(errs...)
}
