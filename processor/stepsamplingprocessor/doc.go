// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package stepsamplingprocessor keeps a deterministic share of training
// steps: whether an iteration is kept is a function of the run id and the
// iteration alone, so every rank, every collector and every restart keeps
// the same iterations, and a kept step is kept whole on each rank. Steps
// with an error, straggler steps (marked by rank_strategy) and spans outside
// steps are always kept. Spans are tied to their step by start time, per
// rank, and those whose step span has not arrived yet are held for it.
package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"
