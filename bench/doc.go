// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package bench measures the otelcol-nemo binary under NeMo Lens-shaped load.
//
//   - loadgen/ is the load generator (a command): requests marshaled once and
//     patched per send, over raw gRPC or HTTP/protobuf, at a fixed rate or as
//     fast as the collector accepts.
//   - configs/ holds the collector configs of the benchmark scenarios.
//   - The scenario harness is a Go test of this package (scenarios_test.go):
//     by default it runs every scenario for about two seconds against the
//     built binary (the smoke run `make test` and CI do); with -full it runs
//     the whole comparison and writes BENCHMARKS.md. run.sh (`make bench`)
//     runs the Go micro-benchmarks and then the full scenario run.
package bench // import "github.com/nemo-lens/otelcol-nemo/bench"
