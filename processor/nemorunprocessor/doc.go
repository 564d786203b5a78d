// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemorunprocessor gives every resource of a training job one
// consistent nemo.run.id. It keeps an id the sender set, reconciles the
// per-process random ids NeMo Lens mints when a job has no shared id to an id
// derived statelessly from job keys (SLURM job id, NeMo job uuid, Kubernetes
// job), gives the ranks of a bare torchrun launch on one host (per-process
// ids, no job key) the id of its first rank, fills missing ids from job keys,
// the collector's environment, a configured value or an id generated at
// start, inserts the W&B entity and project when missing, and checks rank
// attributes.
package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"
