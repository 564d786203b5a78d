// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const (
	attrEntity  = "wandb.entity"
	attrProject = "wandb.project"
	attrRunID   = "wandb.wb_run_id"
	attrService = "service.name"
)

// projectKey is the Weave project a request is written to.
type projectKey struct {
	entity, project string
}

func (k projectKey) String() string { return k.entity + "/" + k.project }

// router turns an incoming batch into per-project Weave requests, applying
// the entity/project defaults, run linking and key renames.
type router struct {
	entity, project string
	runIDAttribute  string
}

// resourcePlan is what happens to one ResourceSpans.
type resourcePlan struct {
	key                   projectKey
	addEntity, addProject bool
	runIDField            []byte // encoded wandb.wb_run_id attribute, nil when not linking
	runID                 string
}

// runIDProblem describes a resource whose spans could not be linked to a run.
type runIDProblem struct {
	spans   int
	reason  string
	service string
}

// plan decides where the spans of rs, the i-th resource, go and what
// changes on the way. It returns false when the resource has no entity or
// project: it is recorded in b.unroutable.
func (r *router) plan(b *batch, i int, rs ptrace.ResourceSpans) (resourcePlan, bool) {
	attrs := rs.Resource().Attributes()
	var p resourcePlan
	entity, hasEntity := attrString(attrs.Get(attrEntity))
	if !hasEntity && r.entity != "" {
		entity, p.addEntity = r.entity, true
	}
	project, hasProject := attrString(attrs.Get(attrProject))
	if !hasProject && r.project != "" {
		project, p.addProject = r.project, true
	}
	if entity == "" || project == "" {
		b.unchanged = false
		if spanCount(rs) > 0 {
			b.unroutable = append(b.unroutable, int32(i))
		}
		return p, false
	}
	p.key = projectKey{entity: entity, project: project}
	if r.runIDAttribute != "" {
		id, present := attrString(attrs.Get(r.runIDAttribute))
		switch {
		case !present:
			b.runIDs = append(b.runIDs, r.runIDProblem(rs, "the resource has no (or an empty) "+r.runIDAttribute+" attribute"))
		case strings.ContainsAny(id, "/:"):
			b.runIDs = append(b.runIDs, r.runIDProblem(rs, fmt.Sprintf("%s=%q is not a bare W&B run id (it contains / or :)", r.runIDAttribute, id)))
		default:
			p.runID = id
			p.runIDField = stringAttributeField(attrRunID, id)
		}
	}
	return p, true
}

func (*router) runIDProblem(rs ptrace.ResourceSpans, reason string) runIDProblem {
	service, _ := attrString(rs.Resource().Attributes().Get(attrService))
	return runIDProblem{spans: spanCount(rs), reason: reason, service: service}
}

// attrString returns an attribute's value as a string, and whether it is
// present and not empty.
func attrString(v pcommon.Value, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	s := v.AsString()
	return s, s != ""
}

func spanCount(rs ptrace.ResourceSpans) int {
	n := 0
	for j := 0; j < rs.ScopeSpans().Len(); j++ {
		n += rs.ScopeSpans().At(j).Spans().Len()
	}
	return n
}
