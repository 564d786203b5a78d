# otelcol-nemo: build, run and test the collector distribution.
# `make` alone lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
BUILD_DIR   := _build
BINARY      := $(BUILD_DIR)/otelcol-nemo
TOOLS_DIR   := .tools
BUILDER     := $(TOOLS_DIR)/builder
MDATAGEN    := $(TOOLS_DIR)/mdatagen
JAEGER      := $(TOOLS_DIR)/jaeger
# versitygw, an S3 server over a directory: the real S3 peer of the
# s3-archive overlay's e2e test. Pinned; one directory per version.
VERSITYGW_VERSION := v1.8.0
VERSITYGW   := $(TOOLS_DIR)/versitygw-$(VERSITYGW_VERSION)/versitygw
# golangci-lint, pinned; one directory per version, so bumping the version
# builds the new one on the next `make lint`.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
CONFIG      ?= configs/file.yaml
export GOFLAGS ?= -buildvcs=false

# The Go sources the binary is built from, and the pages' embedded assets: a
# change to one rebuilds it. Test
# support is left out: internal/testing/ (`make lint` checks that the binary
# links none of it) and mdatagen's internal/metadatatest packages.
COMPONENT_SRC := $(shell find exporter processor receiver confmap internal -name '*.go' ! -name '*_test.go' ! -path 'internal/tools/*' ! -path 'internal/testing/*' ! -path '*/internal/metadatatest/*' 2>/dev/null) \
                 $(shell find exporter -path '*/assets/*' -type f 2>/dev/null)
# The Go modules `make test` and `make lint` cover: the components (the root
# module), and e2e/ and bench/, each a module of its own so that a
# distribution importing the components does not inherit what only the
# tests use (k8s.io, compose-go, jsonschema). Both replace the root module
# with ../, so they test the code in this tree. internal/tools and
# internal/tools/jaeger hold pinned tools only.
MODULES := . e2e bench
# Our packages that builder-config.yaml puts in the binary, for that check.
COMPONENT_PKGS := $(shell sed -n 's|^ *import: \(github.com/nemo-lens/otelcol-nemo/.*\)|\1|p' builder-config.yaml)
METADATA      := $(shell find exporter processor receiver -name metadata.yaml 2>/dev/null)
GENERATED_DIRS := $(sort $(dir $(METADATA)))

.PHONY: help
help: ## List the targets
	@echo "otelcol-nemo: make <target>"
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(BUILDER) $(MDATAGEN) &: internal/tools/go.mod internal/tools/go.sum
	cd internal/tools && $(GO) build -o ../../$(TOOLS_DIR)/ go.opentelemetry.io/collector/cmd/builder go.opentelemetry.io/collector/cmd/mdatagen
	@touch $(BUILDER) $(MDATAGEN)

# Jaeger v1.76.0, the real OTLP backend of the fanout e2e test. Its own module
# (internal/tools/jaeger: Jaeger's replace directives keep it out of ours);
# rebuilt only when that module's go.mod/go.sum change. Cold: ~2.3 GB RSS and
# about 8 min on 2 idle cores; the Go build cache makes later rebuilds quick.
$(JAEGER): internal/tools/jaeger/go.mod internal/tools/jaeger/go.sum
	cd internal/tools/jaeger && CGO_ENABLED=0 $(GO) build -o ../../../$(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger
	@touch $(JAEGER)

# golangci-lint for `make lint`, built on first use with `go install` from the
# module proxy (its own go.mod, not ours; a few minutes cold on 2 cores). The
# rule set is contrib's: see .golangci.yml.
$(GOLANGCI_LINT):
	GOBIN=$(abspath $(dir $(GOLANGCI_LINT))) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: jaeger
jaeger: $(JAEGER) ## Build Jaeger v1.76.0 into .tools/jaeger (for the fanout e2e test)

# versitygw from the module proxy with `go install` (its go.mod has no
# replace directives; about 3 min cold on 2 cores).
$(VERSITYGW):
	GOBIN=$(abspath $(dir $(VERSITYGW))) CGO_ENABLED=0 $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

.PHONY: s3server
s3server: $(VERSITYGW) ## Build versitygw $(VERSITYGW_VERSION) into .tools/ (the S3 server of the s3-archive e2e test)

.PHONY: tools
tools: $(BUILDER) $(MDATAGEN) $(GOLANGCI_LINT) ## Build the pinned ocb, mdatagen and golangci-lint into .tools/

$(BINARY): builder-config.yaml go.mod go.sum $(COMPONENT_SRC) $(BUILDER)
	CGO_ENABLED=0 $(BUILDER) --config builder-config.yaml
	@touch $(BINARY)

.PHONY: build
build: $(BINARY) ## Build _build/otelcol-nemo with ocb (incremental: no-op when nothing changed)

.PHONY: run
run: $(BINARY) ## Build and run the collector on the default preset (CONFIG=configs/file.yaml)
	$(BINARY) --config=$(CONFIG)

# OTELCOL_NEMO_REQUIRE_BINARY: a missing binary fails the tests that need it;
# a bare `go test ./...` skips them instead, naming `make build`. One
# `go test` per module (a pattern does not cross into a nested module); each
# runs even when an earlier one failed, and any failure fails the target.
# The e2e module takes about 26 minutes on two cores; its timeout leaves
# room for a slower machine (a hang still ends the run well inside CI's).
.PHONY: test
test: $(BINARY) $(JAEGER) $(VERSITYGW) ## Run every test of every module: unit, component and e2e against the built binary
	@status=0; for m in $(MODULES); do \
		echo "== go test ($$m)"; \
		OTELCOL_NEMO_REQUIRE_BINARY=1 $(GO) -C $$m test -count=1 -timeout 40m ./... || status=1; \
	done; exit $$status

# Every fuzz target, as package:Target. Their seed corpora live in each
# package's testdata/fuzz/ and run in every `go test`; `make fuzz` explores.
FUZZ_TARGETS := \
	./exporter/jsonlfileexporter:FuzzEncodeOTLP \
	./exporter/jsonlfileexporter:FuzzAppendJSONString \
	./exporter/jsonlfileexporter:FuzzPathTemplateValue \
	./exporter/weaveexporter:FuzzRenameConflicts \
	./exporter/weaveexporter:FuzzRequestEncoding \
	./internal/rankattr:FuzzParseString \
	./internal/steps:FuzzSummaries
# A count (Nx), not a duration: with a duration, Go's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" when the deadline
# races a busy worker (golang/go#75804, seen here under load); a count has
# no deadline to race. 50,000 inputs take 5-30 s per target on two cores.
FUZZTIME ?= 50000x

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME inputs (default 50000x)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

.PHONY: generate
generate: $(MDATAGEN) ## Regenerate mdatagen code and configs/*.yaml (from configs/src/); fails if the committed files were stale
	@set -e; for d in $(GENERATED_DIRS); do (cd $$d && ../../$(MDATAGEN) metadata.yaml); done
	cd internal/tools && $(GO) run ./presetgen -root ../..
	@if ! git diff --quiet -- $(GENERATED_DIRS) configs || [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED_DIRS) configs)" ]; then \
		git status --short -- $(GENERATED_DIRS) configs; \
		echo "generated files were stale: review and commit the changes above"; exit 1; fi

.PHONY: lint
lint: $(GOLANGCI_LINT) ## License headers, no test support in the binary, gofmt, go vet and golangci-lint on every module (pinned; contrib's rule set, .golangci.yml)
	.ci/license-headers.sh
	@linked=$$($(GO) list -deps $(COMPONENT_PKGS) | grep -E 'otelcol-nemo/internal/testing/|/internal/metadatatest$$' || true); \
		if [ -n "$$linked" ]; then echo "the binary links test-support packages (a package the binary needs is not test support: move it out of internal/testing/):"; echo "$$linked"; exit 1; fi
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^_build/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "== go vet, golangci-lint ($$m)"; \
		$(GO) -C $$m vet ./...; \
		(cd $$m && $(abspath $(GOLANGCI_LINT)) run --config $(abspath .golangci.yml) ./...); \
	done

.PHONY: bench
bench: $(BINARY) ## Run the benchmarks and write BENCHMARKS.md
	OTELCOL_NEMO_REQUIRE_BINARY=1 ./bench/run.sh

.PHONY: docker
docker: $(BINARY) ## Build the container image otelcol-nemo:local (FROM scratch; no registry needed)
	docker/build.sh

.PHONY: docker-test
docker-test: $(BINARY) ## Build the image; run it and docker-compose.otel.yml on a local Docker daemon (root)
	docker/test.sh

.PHONY: clean
clean: ## Remove the build output, tools and the staged image context
	rm -rf $(BUILD_DIR) $(TOOLS_DIR) docker/context
