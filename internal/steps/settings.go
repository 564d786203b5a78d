// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// The settings types below are squashed (`mapstructure:",squash"`) into the
// components' configs, so that their YAML keys stay where they are. Their
// check is named Check, not Validate: the collector validates every field of
// a config, and would report a squashed field's errors a second time under
// the field's Go name.

// The errors of the settings' checks. Each message wraps one of them with
// the offending key and value, so that it still names the key and the fix
// while the components' tests match the kind with errors.Is. The ones that
// start without a key (ErrNoKeys, ErrEmptyKey, ErrScoreRange) follow the key
// they are about: "rank_keys must list at least one attribute key, e.g. ...".
var (
	ErrNoStepSpanNames      = errors.New("step_span_names must list at least one span name, e.g. [megatron.train_step, megatron.train.iteration]")
	ErrNoIterationAttribute = errors.New("iteration_attribute must not be empty; the default is megatron.iteration")
	ErrScoreRange           = errors.New("must be a score in [0,1] (the fastest time over this rank's; 0 switches it off)")
	ErrHistory              = errors.New("history must be at least 1 step")
	ErrDecisionWait         = errors.New("decision_wait must be positive (a step is decided at the latest this long after its first step span)")
	ErrNegativeSpanWait     = errors.New("span_wait must be positive, or 0 to wait as long as decision_wait")
	ErrNoKeys               = errors.New("must list at least one attribute key")
	ErrEmptyKey             = errors.New("must not be empty; remove the entry")
)

// DefaultDecisionWait is how long a step stays open after its first step
// span, in every component that opens steps; and how long a span waits for
// its step span when span_wait is not set.
const DefaultDecisionWait = 10 * time.Second

// Score defaults, those of nvidia-resiliency-ext's examples.
const (
	DefaultRelativeThreshold   = 0.7
	DefaultIndividualThreshold = 0.7
	DefaultHistory             = 20
)

// Spans name the span that covers one rank's step and the attribute that
// numbers it.
type Spans struct {
	// StepSpanNames are the names of the span that covers one rank's step
	// (Megatron-LM: megatron.train_step, or megatron.train.iteration in its
	// newer span taxonomy), a trace root or a child of a run-long job span.
	StepSpanNames []string `mapstructure:"step_span_names"`

	// IterationAttribute is the step span attribute holding the iteration
	// number (an int or a decimal string), which lines up the ranks' steps.
	IterationAttribute string `mapstructure:"iteration_attribute"`
}

// DefaultSpans are Megatron-LM's step spans in both taxonomies: the older
// megatron.train_step and the newer megatron.train.iteration, numbered by
// megatron.iteration.
func DefaultSpans() Spans {
	return Spans{
		StepSpanNames:      []string{attrkey.MegatronTrainStep, attrkey.MegatronTrainIteration},
		IterationAttribute: attrkey.MegatronIteration,
	}
}

// DefaultWaitSpans are Megatron-LM's spans in which a rank waits for the
// others: the gradient all-reduce, and the pipeline-parallel receives.
func DefaultWaitSpans() []string {
	return []string{"megatron.grad_sync.*", "megatron.p2p.recv_*", "megatron.pp.recv_*"}
}

// Check returns an error naming each offending key.
func (s *Spans) Check() error {
	var errs []error
	if len(s.StepSpanNames) == 0 {
		errs = append(errs, ErrNoStepSpanNames)
	}
	errs = append(errs, CheckKeys("step_span_names", s.StepSpanNames, false))
	if strings.TrimSpace(s.IterationAttribute) == "" {
		errs = append(errs, ErrNoIterationAttribute)
	}
	return errors.Join(errs...)
}

// Scoring says how a rank's busy time on a step is measured and when it
// makes the rank a straggler.
type Scoring struct {
	// WaitSpans are the names of the spans in which a rank waits for the
	// others (gradient sync, pipeline receives): exact names, or prefixes
	// ending in "*". A rank's busy time on a step is the step's duration
	// minus the time covered by these spans within the step.
	WaitSpans []string `mapstructure:"wait_spans"`

	// RelativeThreshold: a rank is a straggler on a step when the step's
	// fastest busy time over its own is below this, in [0,1]; 0 switches
	// the relative score off.
	RelativeThreshold float64 `mapstructure:"relative_threshold"`

	// IndividualThreshold: a rank is a straggler on a step when its best
	// busy time over its last History steps over this step's is below this,
	// in [0,1]; 0 switches the individual score off.
	IndividualThreshold float64 `mapstructure:"individual_threshold"`

	// History is the number of a rank's most recent steps (this one
	// included) whose best busy time the individual score compares with.
	History int `mapstructure:"history"`
}

// DefaultScoring waits in Megatron-LM's communication spans and scores as
// nvidia-resiliency-ext's examples do.
func DefaultScoring() Scoring {
	return Scoring{
		WaitSpans:           DefaultWaitSpans(),
		RelativeThreshold:   DefaultRelativeThreshold,
		IndividualThreshold: DefaultIndividualThreshold,
		History:             DefaultHistory,
	}
}

// Check returns an error naming each offending key.
func (s *Scoring) Check() error {
	var errs []error
	if _, err := ParsePatterns(s.WaitSpans); err != nil {
		errs = append(errs, fmt.Errorf("wait_spans: %w", err))
	}
	errs = append(errs,
		checkScore("relative_threshold", s.RelativeThreshold),
		checkScore("individual_threshold", s.IndividualThreshold))
	if s.History < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", ErrHistory, s.History))
	}
	return errors.Join(errs...)
}

// Thresholds are the score thresholds, with at most maxRanks stragglers a
// step.
func (s *Scoring) Thresholds(maxRanks int) stepbusy.Thresholds {
	return stepbusy.Thresholds{Relative: s.RelativeThreshold, Individual: s.IndividualThreshold, MaxRanks: maxRanks}
}

func checkScore(key string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("%s %w, got %v", key, ErrScoreRange, v)
	}
	return nil
}

// Settings are what a component that scores steps needs to know about them.
type Settings struct {
	Spans   `mapstructure:",squash"`
	Scoring `mapstructure:",squash"`
}

// DefaultSettings are DefaultSpans and DefaultScoring.
func DefaultSettings() Settings {
	return Settings{Spans: DefaultSpans(), Scoring: DefaultScoring()}
}

// Check returns an error naming each offending key.
func (s *Settings) Check() error {
	return errors.Join(s.Spans.Check(), s.Scoring.Check())
}

// Waits say how long steps and spans wait.
type Waits struct {
	// DecisionWait is the longest a step stays open, from the first step
	// span of that (run, group, iteration) seen from any rank. A step is
	// decided earlier, at the next tick, once every rank of its world has
	// reported its step span.
	DecisionWait time.Duration `mapstructure:"decision_wait"`

	// SpanWait is the longest a span waits, from its arrival, for the step
	// span that ties it to its step; 0 (the default) waits as long as
	// DecisionWait.
	SpanWait time.Duration `mapstructure:"span_wait"`
}

// DefaultWaits keep a step open DefaultDecisionWait, and a span as long.
func DefaultWaits() Waits { return Waits{DecisionWait: DefaultDecisionWait} }

// Check returns an error naming each offending key.
func (w *Waits) Check() error {
	var errs []error
	if w.DecisionWait <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", ErrDecisionWait, w.DecisionWait))
	}
	if w.SpanWait < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", ErrNegativeSpanWait, w.SpanWait))
	}
	return errors.Join(errs...)
}

// Span is how long a span waits for its step span.
func (w *Waits) Span() time.Duration {
	if w.SpanWait > 0 {
		return w.SpanWait
	}
	return w.DecisionWait
}

// Keys are the resource attributes a rank's identity is read from, first
// present wins in each list.
type Keys struct {
	// RankKeys are the resource attributes holding the rank.
	RankKeys []string `mapstructure:"rank_keys"`

	// WorldSizeKeys are the resource attributes holding the world size: a
	// step is complete once that many ranks reported.
	WorldSizeKeys []string `mapstructure:"world_size_keys"`

	// LocalRankKeys are the resource attributes holding the rank within its
	// node.
	LocalRankKeys []string `mapstructure:"local_rank_keys"`

	// GroupKeys are the resource attributes that together identify a run and
	// worker group; rank numbers are only meaningful within one group.
	GroupKeys []string `mapstructure:"group_keys"`
}

// DefaultKeys accept both spellings NeMo Lens sends, newest first.
func DefaultKeys() Keys {
	return Keys{
		RankKeys:      slices.Clone(rankattr.DefaultRankKeys),
		WorldSizeKeys: slices.Clone(rankattr.DefaultWorldSizeKeys),
		LocalRankKeys: slices.Clone(rankattr.DefaultLocalRankKeys),
		GroupKeys:     slices.Clone(rankattr.DefaultGroupKeys),
	}
}

// Need says which of the keys must list at least one attribute.
type Need struct {
	Rank, WorldSize, LocalRank bool
}

// Check returns an error naming each offending key.
func (k *Keys) Check(need Need) error {
	return errors.Join(
		CheckKeys("rank_keys", k.RankKeys, need.Rank),
		CheckKeys("world_size_keys", k.WorldSizeKeys, need.WorldSize),
		CheckKeys("local_rank_keys", k.LocalRankKeys, need.LocalRank),
		CheckKeys("group_keys", k.GroupKeys, false),
	)
}

var keyExamples = map[string]string{
	"rank_keys":       "[nv.dl.rank, dl.rank]",
	"world_size_keys": "[nv.dl.world_size, dl.world_size]",
	"local_rank_keys": "[nv.dl.local_rank, dl.local_rank]",
	"group_keys":      "[nemo.run.id, rl.worker_group]",
}

// CheckKeys checks a list of names under key: none empty, and at least one
// when required.
func CheckKeys(key string, list []string, required bool) error {
	if required && len(list) == 0 {
		return fmt.Errorf("%s %w, e.g. %s", key, ErrNoKeys, keyExamples[key])
	}
	for i, k := range list {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("%s[%d] %w", key, i, ErrEmptyKey)
		}
	}
	return nil
}
