// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

// Values of nemo.run_id_source. It is written only when this processor set
// or replaced nemo.run.id; a resource without it carries its sender's id.
const (
	sourceJobKeys    = "job_keys"
	sourceEnv        = "env"
	sourceStatic     = "static"
	sourceGenerated  = "generated"
	sourceSingleNode = "single_node"
)

// writtenKeys are the resource attributes this processor writes. Every written key is
// chosen so that it is neither a dotted prefix of another key a rank sends nor
// has one (Weave expands dotted keys into nested objects and rejects a span
// carrying both `k` and `k.x`): hence `nemo.original_run_id` and
// `nemo.run_id_source`, never `nemo.run.id.<x>`. The names are in
// internal/attrkey.
var writtenKeys = []string{
	attrkey.RunID, attrkey.OriginalRunID, attrkey.RunIDSource,
	attrkey.Rank, attrkey.WorldSize, attrkey.LocalRank,
	attrkey.WandbEntity, attrkey.WandbProject,
}

func isWrittenKey(key string) bool {
	return slices.Contains(writtenKeys, key)
}

// outcome is what happened to one resource's nemo.run.id.
type outcome int

const (
	outcomeKept outcome = iota
	outcomeDerived
	outcomeReconciled
	outcomeOverridden
	outcomeEnv
	outcomeStatic
	outcomeGenerated
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"kept", "derived", "reconciled", "overridden", "env", "static", "generated"}

// outcomeHeld: the resource's single-node launch is not decided yet; it is
// assigned again once it is, and only that outcome is counted.
const outcomeHeld = numOutcomes

// rankField indexes the three rank attributes.
type rankField int

const (
	fieldRank rankField = iota
	fieldWorldSize
	fieldLocalRank
	numRankFields
)

var (
	rankFieldNames = [numRankFields]string{"rank", "world_size", "local_rank"}
	rankFieldKeys  = [numRankFields][]string{rankattr.DefaultRankKeys, rankattr.DefaultWorldSizeKeys, rankattr.DefaultLocalRankKeys}
	canonicalKeys  = [numRankFields]string{attrkey.Rank, attrkey.WorldSize, attrkey.LocalRank}
)

// tally counts what one batch did; it is flushed to the internal metrics once
// per batch so that the per-resource work stays allocation-free.
type tally struct {
	resources int64
	ids       [numOutcomes]int64
	invalid   [numRankFields]int64
	// unreconciled[reasonNone] counts nothing useful and is not recorded.
	unreconciled [numReasons]int64
	// held is the undecided launch of the resource just assigned
	// outcomeHeld.
	held *launch
}

// heldResource is a resource waiting for the decision of its launch.
type heldResource struct {
	attrs  pcommon.Map
	launch *launch
}

type runProcessor struct {
	logger *zap.Logger

	override   bool
	jobKeys    [][]string
	perProcess *regexp.Regexp // nil: every sender id is taken as job-wide

	// Candidate ids from the config; empty when not available.
	envID       string
	staticID    string
	generatedID string
	// collectorID/collectorOutcome: the id override mode writes.
	collectorID      string
	collectorOutcome outcome

	wandbEntity    string
	wandbProject   string
	canonicalRanks bool

	// single groups per-process ids without a job key by launch; nil when
	// reconcile_single_node is off or with override. Shared by the signals
	// of one component; release drops this processor's share.
	single  *singleNode
	release func()
	// clock runs single-node state the processor creates itself
	// (withClock); stopped is closed at shutdown, releasing held requests.
	clock   clock.Clock
	stopped chan struct{}

	telemetry     *metadata.TelemetryBuilder
	resourcesOpts []metric.AddOption
	idsOpts       [numOutcomes][]metric.AddOption
	invalidOpts   [numRankFields][]metric.AddOption
	unrecOpts     [numReasons][]metric.AddOption
}

// processorOption changes how newRunProcessor builds a processor.
type processorOption func(*runProcessor)

// withSingleNode makes the processor use s, shared with the other signals
// of its component, and call release at shutdown.
func withSingleNode(s *singleNode, release func()) processorOption {
	return func(p *runProcessor) { p.single, p.release = s, release }
}

// withClock makes a processor that creates its own single-node state run it
// on clk (tests).
func withClock(clk clock.Clock) processorOption {
	return func(p *runProcessor) { p.clock = clk }
}

// newRunProcessor builds the processor for one signal from its config alone
// (it never reads the collector's environment: the config does, with
// ${env:...}); generatedID is the id generated once per collector start.
//
// Without withSingleNode, a processor that needs single-node state gets its
// own, on the wall clock unless withClock says otherwise, and stops it at
// shutdown.
func newRunProcessor(set processor.Settings, cfg *Config, signal, generatedID string, opts ...processorOption) (*runProcessor, error) {
	p := &runProcessor{
		logger:         set.Logger,
		override:       cfg.Override,
		jobKeys:        cfg.JobKeys,
		envID:          firstNonBlank(cfg.EnvRunIDs),
		staticID:       cfg.RunID,
		generatedID:    generatedID,
		wandbEntity:    strings.TrimSpace(cfg.WandbEntity),
		wandbProject:   strings.TrimSpace(cfg.WandbProject),
		canonicalRanks: cfg.CanonicalRanks,
		stopped:        make(chan struct{}),
	}
	for _, opt := range opts {
		opt(p)
	}
	if !usesSingleNode(cfg) {
		p.single = nil
	} else if p.single == nil {
		clk := p.clock
		if clk == nil {
			clk = clock.Wall()
		}
		p.single = newSingleNode(cfg, clk)
		p.release = p.single.stop
	}
	if cfg.PerProcessIDPattern != "" {
		re, err := regexp.Compile(cfg.PerProcessIDPattern)
		if err != nil {
			return nil, fmt.Errorf("compile per_process_id_pattern: %w", err)
		}
		p.perProcess = re
	}

	if p.override {
		switch {
		case p.envID != "":
			p.collectorID, p.collectorOutcome = p.envID, outcomeEnv
		case p.staticID != "":
			p.collectorID, p.collectorOutcome = p.staticID, outcomeStatic
		default:
			return nil, errOverrideWithoutRunID
		}
		p.logger.Info("Replacing every sender's run id", zap.String("run_id", p.collectorID), zap.String("from", collectorIDOrigin(p.collectorOutcome)))
	} else {
		p.logger.Debug("Run ids for resources without one, after job keys",
			zap.String("env", p.envID), zap.String("static", p.staticID), zap.String("generated", p.generatedID))
	}

	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create internal metrics: %w", err)
	}
	p.telemetry = tb
	signalAttr := attribute.String("otel.signal", signal)
	p.resourcesOpts = addOptions(signalAttr)
	for o := range numOutcomes {
		p.idsOpts[o] = addOptions(signalAttr, attribute.String("outcome", outcomeNames[o]))
	}
	for f := range numRankFields {
		p.invalidOpts[f] = addOptions(signalAttr, attribute.String("rank_attribute", rankFieldNames[f]))
	}
	for r := reasonNone + 1; r < numReasons; r++ {
		p.unrecOpts[r] = addOptions(signalAttr, attribute.String("reason", reasonNames[r]))
	}
	return p, nil
}

// usesSingleNode: single-node reconciliation can apply (it never does with
// override, nor when no id counts as per-process).
func usesSingleNode(cfg *Config) bool {
	return cfg.ReconcileSingleNode && !cfg.Override && cfg.PerProcessIDPattern != ""
}

func addOptions(kvs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

func collectorIDOrigin(o outcome) string {
	if o == outcomeEnv {
		return "env_run_ids"
	}
	return "run_id"
}

func (p *runProcessor) shutdown(context.Context) error {
	p.telemetry.Shutdown()
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	if p.release != nil {
		p.release()
		p.release = nil
	}
	return nil
}

func (p *runProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	return td, processResources[ptrace.ResourceSpans](ctx, p, td.ResourceSpans())
}

func (p *runProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	return md, processResources[pmetric.ResourceMetrics](ctx, p, md.ResourceMetrics())
}

func (p *runProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	return ld, processResources[plog.ResourceLogs](ctx, p, ld.ResourceLogs())
}

// processResources gives every resource of a batch, of any signal, its run
// id, waiting for the decisions it needs.
func processResources[R pdatautil.Resource, S pdatautil.Resources[R]](ctx context.Context, p *runProcessor, rs S) error {
	var t tally
	var held []heldResource
	for i := range rs.Len() {
		held = p.processResourceOrHold(rs.At(i).Resource().Attributes(), &t, held)
	}
	err := p.awaitDecisions(ctx, held, &t)
	p.record(ctx, &t)
	return err
}

func (p *runProcessor) processResourceOrHold(attrs pcommon.Map, t *tally, held []heldResource) []heldResource {
	if l := p.processResource(attrs, t); l != nil {
		held = append(held, heldResource{attrs: attrs, launch: l})
	}
	return held
}

// awaitDecisions blocks the request until every undecided single-node
// launch its resources belong to is decided, then gives those resources
// their run ids; nothing of the request is passed on before. A request
// without such resources (explicit, job-keyed, refused or decided ids)
// returns at once. On ctx done or shutdown the request fails (retryably:
// its sender retries) rather than going out with undecided ids.
func (p *runProcessor) awaitDecisions(ctx context.Context, held []heldResource, t *tally) error {
	for len(held) > 0 {
		if err := p.single.await(ctx, p.stopped, held); err != nil {
			return err
		}
		// An id forgotten under the bound meanwhile may start a new launch:
		// wait again for that one.
		next := held[:0]
		for _, h := range held {
			if l := p.assignAndCount(h.attrs, t); l != nil {
				next = append(next, heldResource{attrs: h.attrs, launch: l})
			}
		}
		held = next
	}
	return nil
}

// processResource brings one resource's identity attributes in line. It does
// not allocate when the resource already carries everything it needs.
//
// It returns the undecided single-node launch the resource must wait for,
// or nil when its run id is assigned.
func (p *runProcessor) processResource(attrs pcommon.Map, t *tally) *launch {
	t.resources++
	p.checkRanks(attrs, t)
	insertIfMissing(attrs, attrkey.WandbEntity, p.wandbEntity)
	insertIfMissing(attrs, attrkey.WandbProject, p.wandbProject)
	return p.assignAndCount(attrs, t)
}

func (p *runProcessor) assignAndCount(attrs pcommon.Map, t *tally) *launch {
	o := p.assignRunID(attrs, t)
	if o == outcomeHeld {
		l := t.held
		t.held = nil
		return l
	}
	t.ids[o]++
	return nil
}

// checkRanks counts rank attributes that are present but unusable (they are
// left untouched) and, if configured, writes a typed copy of the valid ones.
func (p *runProcessor) checkRanks(attrs pcommon.Map, t *tally) {
	for f := range numRankFields {
		n, _, status := rankattr.Lookup(attrs, rankFieldKeys[f])
		switch status {
		case rankattr.Invalid:
			t.invalid[f]++
		case rankattr.Valid:
			if p.canonicalRanks {
				putIntIfDifferent(attrs, canonicalKeys[f], n)
			}
		}
	}
}

func putIntIfDifferent(attrs pcommon.Map, key string, n int64) {
	if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeInt && v.Int() == n {
		return
	}
	attrs.PutInt(key, n)
}

// insertIfMissing sets key to value when the resource has no such attribute
// or an empty string (which Weave treats as no project: it drops the span).
// Any other existing value is never overwritten.
func insertIfMissing(attrs pcommon.Map, key, value string) {
	if value == "" {
		return
	}
	if v, ok := attrs.Get(key); ok && (v.Type() != pcommon.ValueTypeStr || v.Str() != "") {
		return
	}
	attrs.PutStr(key, value)
}

func (p *runProcessor) record(ctx context.Context, t *tally) {
	if t.resources == 0 {
		return
	}
	p.telemetry.ProcessorNemoRunResources.Add(ctx, t.resources, p.resourcesOpts...)
	for o, n := range t.ids {
		if n > 0 {
			p.telemetry.ProcessorNemoRunIds.Add(ctx, n, p.idsOpts[o]...)
		}
	}
	for f, n := range t.invalid {
		if n > 0 {
			p.telemetry.ProcessorNemoRunInvalidRanks.Add(ctx, n, p.invalidOpts[f]...)
		}
	}
	for r := reasonNone + 1; r < numReasons; r++ {
		if n := t.unreconciled[r]; n > 0 {
			p.telemetry.ProcessorNemoRunUnreconciledIds.Add(ctx, n, p.unrecOpts[r]...)
		}
	}
}
