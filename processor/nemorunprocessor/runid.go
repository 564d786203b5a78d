// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// derivedHashBytes is how much of the SHA-256 a multi-key job id keeps: 6
// bytes, 12 lowercase hex characters, the shape of a NeMo Lens run id.
const derivedHashBytes = 6

// assignRunID gives the resource its nemo.run.id and says how. Precedence
// (README "How the run id is chosen"):
//
//   - override: the collector's own id (environment, then run_id) replaces
//     any sender id that differs.
//   - a sender id is kept unless the resource matches a job key set and the
//     id looks per-process (per_process_id_pattern) and equals neither the
//     job-derived id nor any of the job key values; then it is reconciled to
//     the job-derived id.
//   - a per-process id that matches no job key set goes to single-node
//     reconciliation (singlenode.go), which may give it the id of the first
//     rank of its launch.
//   - a missing id is filled from job keys, the collector's environment,
//     run_id, then the id generated at start.
//
// It does not allocate when the sender's id is kept.
func (p *runProcessor) assignRunID(attrs pcommon.Map, t *tally) outcome {
	raw, present := attrs.Get(attrkey.RunID)
	sender, usable := "", false
	if present {
		sender, usable = senderRunID(raw)
	}

	if p.override {
		if usable && sender == p.collectorID {
			normaliseSenderRunID(raw, sender)
			return outcomeKept
		}
		replaceRunID(attrs, raw, present, p.collectorID, sourceName(p.collectorOutcome))
		if usable {
			return outcomeOverridden
		}
		return p.collectorOutcome
	}

	var j job
	var buf [64]byte
	if usable {
		// Cheapest test first: most explicit ids fail the pattern at once.
		if !p.isPerProcess(sender) {
			normaliseSenderRunID(raw, sender)
			return outcomeKept
		}
		if !p.findJob(attrs, &j) {
			return p.reconcileSingleNode(attrs, raw, sender, t)
		}
		if j.hasValue(sender) {
			normaliseSenderRunID(raw, sender)
			return outcomeKept
		}
		id := j.appendRunID(buf[:0])
		if string(id) == sender {
			// Already reconciled, e.g. by a first collector tier.
			return outcomeKept
		}
		replaceRunID(attrs, raw, present, string(id), sourceJobKeys)
		return outcomeReconciled
	}

	switch {
	case p.findJob(attrs, &j):
		replaceRunID(attrs, raw, present, string(j.appendRunID(buf[:0])), sourceJobKeys)
		return outcomeDerived
	case p.envID != "":
		replaceRunID(attrs, raw, present, p.envID, sourceEnv)
		return outcomeEnv
	case p.staticID != "":
		replaceRunID(attrs, raw, present, p.staticID, sourceStatic)
		return outcomeStatic
	default:
		replaceRunID(attrs, raw, present, p.generatedID, sourceGenerated)
		return outcomeGenerated
	}
}

func (p *runProcessor) isPerProcess(id string) bool {
	return p.perProcess != nil && p.perProcess.MatchString(id)
}

func sourceName(o outcome) string {
	if o == outcomeEnv {
		return sourceEnv
	}
	return sourceStatic
}

// senderRunID reads the sender's nemo.run.id. A non-blank string or an int
// (an id set in code from a numeric SLURM job id) is usable; anything else
// (blank, bool, double, bytes, map, slice) counts as no id.
func senderRunID(v pcommon.Value) (string, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		return s, strings.TrimSpace(s) != ""
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10), true
	default:
		return "", false
	}
}

// normaliseSenderRunID rewrites a kept int id as its decimal string, so that
// backends group ranks that sent "123" and 123 into one run.
func normaliseSenderRunID(raw pcommon.Value, id string) {
	if raw.Type() != pcommon.ValueTypeStr {
		raw.SetStr(id)
	}
}

// replaceRunID writes id and its source, first saving the sender's value in
// nemo.original_run_id unless an upstream nemo_run already saved one (the
// first original is the sender's). raw is the sender's value as read by
// Get: it is rewritten in place before anything is added to the map (an
// addition may move the attributes and leave raw pointing at a stale copy).
func replaceRunID(attrs pcommon.Map, raw pcommon.Value, present bool, id, source string) {
	if present {
		original := raw.AsString()
		raw.SetStr(id)
		if strings.TrimSpace(original) != "" {
			if saved, existed := attrs.GetOrPutEmpty(attrkey.OriginalRunID); !existed {
				saved.SetStr(original)
			}
		}
	} else {
		attrs.PutStr(attrkey.RunID, id)
	}
	attrs.PutStr(attrkey.RunIDSource, source)
}

// maxJobKeys bounds the keys of one job_keys set, so that a match and its
// values fit on the stack.
const maxJobKeys = 8

// job is the job key set a resource matched, with its values read once.
// The values point into the resource's attributes: they are valid until the
// attributes are modified.
type job struct {
	keys   []string
	values [maxJobKeys]pcommon.Value
}

// findJob fills j with the first configured set whose keys are all present
// with a usable value, and reports whether there was one.
func (p *runProcessor) findJob(attrs pcommon.Map, j *job) bool {
	for _, set := range p.jobKeys {
		if j.read(attrs, set) {
			return true
		}
	}
	return false
}

func (j *job) read(attrs pcommon.Map, keys []string) bool {
	if len(keys) > maxJobKeys {
		return false
	}
	for i, k := range keys {
		v, ok := attrs.Get(k)
		if !ok || !usableJobValue(v) {
			return false
		}
		j.values[i] = v
	}
	j.keys = keys
	return true
}

// hasValue reports whether id equals the text of one of the job's values: a
// sender that set nemo.run.id to its SLURM job id (NeMo Lens's fallback) or
// to its job's name has set a job-wide id.
func (j *job) hasValue(id string) bool {
	for _, v := range j.values[:len(j.keys)] {
		if v.Type() == pcommon.ValueTypeInt {
			var buf [20]byte // len("-9223372036854775808")
			if string(strconv.AppendInt(buf[:0], v.Int(), 10)) == id {
				return true
			}
		} else if strings.TrimSpace(v.Str()) == id {
			return true
		}
	}
	return false
}

// appendRunID appends the run id derived from the job's keys and values, a
// pure function of them:
//
//   - one key: the value's text itself, so a SLURM job gets the id NeMo Lens
//     itself falls back to (SLURM_JOB_ID);
//   - several keys: the first 6 bytes, as 12 lowercase hex characters, of
//     SHA-256("k1=v1\nk2=v2\n...") over the keys in configured order.
//
// Shell equivalent of the second case:
// printf 'k8s.namespace.name=ml\nk8s.job.name=llama\n' | sha256sum | cut -c1-12
func (j *job) appendRunID(dst []byte) []byte {
	if len(j.keys) == 1 {
		return appendJobValue(dst, j.values[0])
	}
	var in [512]byte
	h := in[:0]
	for i, k := range j.keys {
		h = append(h, k...)
		h = append(h, '=')
		h = appendJobValue(h, j.values[i])
		h = append(h, '\n')
	}
	sum := sha256.Sum256(h)
	return hex.AppendEncode(dst, sum[:derivedHashBytes])
}

// usableJobValue: an int, or a string that is not blank and has no newline
// (the newline separates fields in the hash input).
func usableJobValue(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return true
	case pcommon.ValueTypeStr:
		s := strings.TrimSpace(v.Str())
		return s != "" && !strings.ContainsAny(s, "\n\r")
	default:
		return false
	}
}

// appendJobValue appends a job key value as text: an int in decimal, a
// string without surrounding spaces, so that "123", " 123" and 123 agree.
func appendJobValue(dst []byte, v pcommon.Value) []byte {
	if v.Type() == pcommon.ValueTypeInt {
		return strconv.AppendInt(dst, v.Int(), 10)
	}
	return append(dst, strings.TrimSpace(v.Str())...)
}

// generateRunID returns 12 lowercase hex characters from crypto/rand, the
// shape of an id NeMo Lens mints itself.
func generateRunID() string {
	var b [derivedHashBytes]byte
	// crypto/rand.Read never returns an error (it aborts the process if
	// the OS source fails).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
