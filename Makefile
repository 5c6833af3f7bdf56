# mysqlctl — `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO            ?= go
PREFIX        ?= /usr/local
BIN           := bin
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT        ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE          ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS       := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
GOLANGCI_LINT  := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
TEST_TIMEOUT  ?= 45m
# The image manifests/watch/deployment.yaml runs (a test keeps the two names equal).
IMAGE         ?= mysqlctl:latest

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/mysqlctl and bin/kubectl-mysql (the same program)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/mysqlctl ./cmd/mysqlctl
	cp -f $(BIN)/mysqlctl $(BIN)/kubectl-mysql

.PHONY: image
image: build ## Build the container image mysqlctl:latest (IMAGE=...) offline with buildah: bin/mysqlctl on an empty base (Dockerfile.local)
	IMAGE="$(IMAGE)" VERSION="$(VERSION)" BIN="$(BIN)/mysqlctl" GO="$(GO)" hack/image.sh

.PHONY: install
install: build ## Install mysqlctl, kubectl-mysql and kubectl completion into $(PREFIX)/bin
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN)/mysqlctl $(BIN)/kubectl-mysql hack/kubectl_complete-mysql $(PREFIX)/bin/

.PHONY: dist
dist: ## Cross-build dist/: linux+darwin amd64+arm64 archives, checksums.txt, krew manifest mysql.yaml (then checked by krew's own validator and installer)
	VERSION="$(VERSION)" DIST_LDFLAGS="$(LDFLAGS)" GO="$(GO)" \
	DIST_DIR=dist DIST_PLATFORMS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64" hack/dist.sh

.PHONY: controlplane
controlplane: ## Build (once, cached by version) etcd and the Kubernetes control plane for tests
	hack/build-controlplane.sh

.PHONY: objectstore
objectstore: ## Build (once, cached by version) versitygw, the S3-compatible object store of tests and the demo
	hack/build-s3.sh

.PHONY: test
test: ## Run every test tier with -race (unit, real MariaDB, real API server, rig end-to-end)
	MYSQLCTL_CONTROLPLANE_BIN="$$(hack/build-controlplane.sh)" && export MYSQLCTL_CONTROLPLANE_BIN && \
	MYSQLCTL_S3_BIN="$${MYSQLCTL_S3_BIN:-$$(hack/build-s3.sh)}" && export MYSQLCTL_S3_BIN && \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ $$($(GO) list ./... | grep -v '/test/e2e$$')

.PHONY: bench
bench: ## Run the benchmarks (speed and memory targets are measured here, never asserted in tests)
	MYSQLCTL_CONTROLPLANE_BIN="$$(hack/build-controlplane.sh)" && export MYSQLCTL_CONTROLPLANE_BIN && \
	MYSQLCTL_S3_BIN="$${MYSQLCTL_S3_BIN:-$$(hack/build-s3.sh)}" && export MYSQLCTL_S3_BIN && \
	export MYSQLCTL_RIG_MAX_PODS="$${MYSQLCTL_RIG_MAX_PODS:-96}" && \
	$(GO) test -run '^$$' -bench . -benchmem -timeout $(TEST_TIMEOUT) ./...

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s)
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} $$pkg || exit 1; \
	  done; \
	done

.PHONY: lint
lint: ## Run golangci-lint (installed through the Go module proxy) with the linters in .golangci.yml
	$(GOLANGCI_LINT) run ./...

.PHONY: generate
generate: ## Regenerate deepcopy code, the CRD in manifests/crd, the Grafana dashboard and completions/
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1 output:crd:artifacts:config=manifests/crd
	$(GO) run ./hack/dashboard > manifests/monitoring/grafana-dashboard.json
	$(MAKE) completions

.PHONY: completions
completions: ## Regenerate the shell completion scripts in completions/
	$(GO) build -o $(BIN)/mysqlctl ./cmd/mysqlctl
	mkdir -p completions
	for sh in bash zsh fish powershell; do $(BIN)/mysqlctl completion $$sh > completions/mysqlctl.$$sh; done

.PHONY: check-generate
check-generate: generate ## Fail when generated files or go.mod/go.sum are stale
	$(GO) mod tidy
	git diff --exit-code -- api manifests completions go.mod go.sum
	@test -z "$$(git status --porcelain -- api manifests completions)" || { git status --porcelain -- api manifests completions; echo "untracked generated files"; exit 1; }

.PHONY: demo
demo: build ## Start the local rig and a real 3-instance cluster, then show it
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop everything make demo started
	hack/demo-down.sh

.PHONY: clean
clean: ## Remove build output (bin/, dist/)
	rm -rf $(BIN) dist
