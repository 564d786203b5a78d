// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package pdatautil holds the pdata helpers that more than one component
// needs and that pdata itself lacks: item counts of one resource, and moving
// a subset of spans into another batch under copies of their resource and
// scope. (contrib's pkg/pdatautil only hashes maps and values.)
package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
