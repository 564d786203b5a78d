// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Config configures the nemo_run processor.
type Config struct {
	// Override replaces every sender's nemo.run.id with the collector's own id
	// (the first non-blank of env_run_ids, else run_id). Meant for a
	// collector run as a per-job sidecar that knows its job's id; the
	// collector refuses to start if it has no such id.
	Override bool `mapstructure:"override"`

	// JobKeys lists sets of resource attribute keys that identify one training
	// job; the first set whose keys are all present (string or int, not
	// blank) wins. The run id is derived from that set's values: a one-key
	// set gives the value itself, a larger set a 12-hex hash (see README).
	// An empty list turns derivation and job-key reconciliation off
	// (single-node reconciliation, below, still applies).
	JobKeys [][]string `mapstructure:"job_keys"`

	// PerProcessIDPattern matches the run ids a sender mints per process when
	// it has no job-wide id (NeMo Lens: 12 lowercase hex). When job keys are
	// present, a sender's id that matches it (and equals none of the job key
	// values) is reconciled to the job-derived id; any other id is treated as
	// an explicitly set job-wide id and kept. A matching id with no job key
	// is a candidate for single-node reconciliation. Empty: every sender id
	// is kept.
	PerProcessIDPattern string `mapstructure:"per_process_id_pattern"`

	// EnvRunIDs are run ids the configuration takes from the collector's
	// environment, e.g. ["${env:NEMO_LENS_RUN_ID:-}", "${env:SLURM_JOB_ID:-}"]:
	// the first non-blank wins. Used to fill a missing id (after job keys),
	// or for every resource with override; such ids get
	// nemo.run_id_source=env. The processor itself never reads its
	// environment. Leave ${env:SLURM_JOB_ID} out on a collector that may run
	// inside a SLURM allocation without being that job's own.
	EnvRunIDs []string `mapstructure:"env_run_ids"`

	// RunID is a static run id, used after job keys and env_run_ids.
	RunID string `mapstructure:"run_id"`

	// WandbEntity is inserted as wandb.entity when a resource has none.
	WandbEntity string `mapstructure:"wandb_entity"`

	// WandbProject is inserted as wandb.project when a resource has none.
	WandbProject string `mapstructure:"wandb_project"`

	// CanonicalRanks writes a typed int copy of a valid rank, world size and
	// local rank (read from nv.dl.* or dl.*, int or decimal string) as
	// nemo.rank, nemo.world_size and nemo.local_rank.
	CanonicalRanks bool `mapstructure:"canonical_ranks"`

	// ReconcileSingleNode gives the ranks of one single-node launch (bare
	// torchrun: same host.name, service.name and world size, distinct ranks,
	// first seen within single_node_window) one run id when they sent
	// per-process ids and no job key. Ids it cannot group stay as they are,
	// with a warning and a count (README "Bare torchrun").
	ReconcileSingleNode bool `mapstructure:"reconcile_single_node"`

	// SingleNodeWindow is how long after the first rank of a launch is seen
	// other ranks may still join it. torchrun starts all local ranks at once.
	SingleNodeWindow time.Duration `mapstructure:"single_node_window"`

	// SingleNodeSettle is how long a launch whose world size is complete
	// waits for a further id before it is decided one job: a rank arriving
	// twice meanwhile reveals two jobs launched together. The requests of an
	// undecided launch are held (their senders wait) until it is decided.
	SingleNodeSettle time.Duration `mapstructure:"single_node_settle"`

	// SingleNodeHold is the longest an undecided launch holds its requests:
	// when it expires the ranks that arrived are merged, and later ranks
	// join or are refused as single_node_window says. Below the 10s export
	// timeout of the OpenTelemetry SDKs, so that a held sender does not give
	// up.
	SingleNodeHold time.Duration `mapstructure:"single_node_hold"`

	// SingleNodeIdleTimeout is how long the processor remembers a launch and
	// its ids after it last saw any of them. A rank silent for longer is
	// decided afresh when it reappears, so this must outlast the quietest
	// stretch of a run (a rank may send nothing between checkpoints).
	SingleNodeIdleTimeout time.Duration `mapstructure:"single_node_idle_timeout"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// The configuration's errors. Each message wraps one of them with the key's
// index or the value it got, so that it names the key and the fix while the
// tests match the kind with errors.Is.
var (
	errEmptyJobKeySet       = errors.New("must list at least one attribute key")
	errTooManyJobKeys       = fmt.Errorf("must list at most %d keys", maxJobKeys)
	errEmptyJobKey          = errors.New("must not be empty")
	errWrittenJobKey        = errors.New("must not be an attribute this processor writes")
	errDuplicateJobKey      = errors.New("must list each key once")
	errPerProcessIDPattern  = errors.New("per_process_id_pattern is not a valid regular expression")
	errMultiLineRunID       = errors.New("must be one line")
	errBlankRunID           = errors.New("run_id must not be blank or have surrounding spaces")
	errOverrideWithoutRunID = errors.New("override is true but the collector has no run id of its own: run_id and every env_run_ids value are empty " +
		"(with the presets, set NEMO_LENS_RUN_ID or NEMO_RUN_ID in the collector's environment)")
	errWandbName          = errors.New("must be a bare W&B name without '/' or ':'")
	errSingleNodeWindow   = errors.New("single_node_window must be positive when reconcile_single_node is true")
	errSingleNodeSettle   = errors.New("single_node_settle must be positive when reconcile_single_node is true")
	errHoldNotAboveSettle = errors.New("single_node_hold must be longer than single_node_settle")
	errLongHold           = fmt.Errorf("single_node_hold must be below %s, the OpenTelemetry SDKs' default export timeout "+
		"(a sender held longer gives up and retries)", maxSingleNodeHold)
	errWindowNotAboveHold = errors.New("single_node_window must be longer than single_node_hold")
	errIdleNotAboveWindow = errors.New("single_node_idle_timeout must be longer than single_node_window")
)

var _ component.Config = (*Config)(nil)

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	for i, set := range cfg.JobKeys {
		if len(set) == 0 {
			errs = append(errs, fmt.Errorf("job_keys[%d] %w", i, errEmptyJobKeySet))
			continue
		}
		if len(set) > maxJobKeys {
			errs = append(errs, fmt.Errorf("job_keys[%d] %w, got %d", i, errTooManyJobKeys, len(set)))
		}
		seen := make(map[string]bool, len(set))
		for j, key := range set {
			switch {
			case strings.TrimSpace(key) == "":
				errs = append(errs, fmt.Errorf("job_keys[%d][%d] %w", i, j, errEmptyJobKey))
			case isWrittenKey(key):
				errs = append(errs, fmt.Errorf("job_keys[%d][%d] %w, got %q", i, j, errWrittenJobKey, key))
			case seen[key]:
				errs = append(errs, fmt.Errorf("job_keys[%d] %w, got %q twice", i, errDuplicateJobKey, key))
			}
			seen[key] = true
		}
	}
	if _, err := regexp.Compile(cfg.PerProcessIDPattern); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", errPerProcessIDPattern, err))
	}
	for i, id := range cfg.EnvRunIDs {
		if strings.ContainsAny(id, "\n\r") {
			errs = append(errs, fmt.Errorf("env_run_ids[%d] %w, got %q", i, errMultiLineRunID, id))
		}
	}
	if cfg.RunID != "" && strings.TrimSpace(cfg.RunID) != cfg.RunID {
		errs = append(errs, fmt.Errorf("%w, got %q", errBlankRunID, cfg.RunID))
	}
	if cfg.Override && cfg.RunID == "" && firstNonBlank(cfg.EnvRunIDs) == "" {
		errs = append(errs, errOverrideWithoutRunID)
	}
	for _, f := range []struct{ key, value string }{{"wandb_entity", cfg.WandbEntity}, {"wandb_project", cfg.WandbProject}} {
		if strings.ContainsAny(f.value, "/:") {
			errs = append(errs, fmt.Errorf("%s %w, got %q", f.key, errWandbName, f.value))
		}
	}
	if cfg.ReconcileSingleNode {
		if cfg.SingleNodeWindow <= 0 {
			errs = append(errs, fmt.Errorf("%w, got %s", errSingleNodeWindow, cfg.SingleNodeWindow))
		}
		if cfg.SingleNodeSettle <= 0 {
			errs = append(errs, fmt.Errorf("%w, got %s", errSingleNodeSettle, cfg.SingleNodeSettle))
		}
		if cfg.SingleNodeHold <= cfg.SingleNodeSettle {
			errs = append(errs, fmt.Errorf("%w (%s), got %s", errHoldNotAboveSettle, cfg.SingleNodeSettle, cfg.SingleNodeHold))
		}
		if cfg.SingleNodeHold >= maxSingleNodeHold {
			errs = append(errs, fmt.Errorf("%w, got %s", errLongHold, cfg.SingleNodeHold))
		}
		if cfg.SingleNodeHold >= cfg.SingleNodeWindow {
			errs = append(errs, fmt.Errorf("%w (%s), got %s", errWindowNotAboveHold, cfg.SingleNodeHold, cfg.SingleNodeWindow))
		}
		if cfg.SingleNodeIdleTimeout <= cfg.SingleNodeWindow {
			errs = append(errs, fmt.Errorf("%w (%s), got %s", errIdleNotAboveWindow, cfg.SingleNodeWindow, cfg.SingleNodeIdleTimeout))
		}
	}
	return errors.Join(errs...)
}

func createDefaultConfig() component.Config {
	return &Config{
		JobKeys: [][]string{
			{attrkey.SlurmJobID},
			{attrkey.DLJobUUID},
			{attrkey.K8sNamespaceName, attrkey.K8sJobName},
		},
		PerProcessIDPattern:   `^[0-9a-f]{12}$`,
		ReconcileSingleNode:   true,
		SingleNodeWindow:      defaultSingleNodeWindow,
		SingleNodeSettle:      defaultSingleNodeSettle,
		SingleNodeHold:        defaultSingleNodeHold,
		SingleNodeIdleTimeout: defaultSingleNodeIdleTimeout,
	}
}

// firstNonBlank returns the first of ids that is not blank, trimmed, or "".
func firstNonBlank(ids []string) string {
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			return id
		}
	}
	return ""
}
