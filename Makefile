# Sluice. The two commands that matter: `make demo` and `make test`.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
GOLANGCI_LINT_VERSION ?= v2.15.0

.PHONY: all build test test-short generate manifests chart-manifests helm-lint helm-template docker-build lint bench demo demo-lab lab-figures lab-variants lab-failover lab-overhead lab-saturation control-plane redis

all: build

build:
	$(GO) build ./...

## test: every test (unit, Redis, envtest, end-to-end); installs Redis and builds the control plane first.
test: redis control-plane
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" $(GO) test -count=1 -timeout 45m ./...

## test-short: the fast loop; needs neither Redis nor the control plane.
test-short:
	$(GO) test -short ./...

## generate: deepcopy functions for the API types.
generate:
	$(GO) tool controller-gen object paths=./api/...

## manifests: CRDs and RBAC from the API types, the controllers' markers and the manager's (leader election).
manifests:
	$(GO) tool controller-gen crd rbac:roleName=sluice-manager paths=./api/... $(if $(wildcard controllers),paths=./controllers/...) paths=./cmd/manager \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@$(MAKE) --no-print-directory chart-manifests

## chart-manifests: the chart's copies of the generated CRDs, the manager's RBAC rules and the alerts.
chart-manifests:
	rm -f charts/sluice/crds/*.yaml
	cp config/crd/bases/*.yaml charts/sluice/crds/
	cp config/rbac/role.yaml charts/sluice/files/manager-role.yaml
	cp config/components/prometheusrule/prometheusrule.yaml charts/sluice/files/prometheusrule.yaml

## helm-lint, helm-template: helm, built from the module's tool dependency, on charts/sluice.
helm-lint:
	$(GO) tool helm lint --strict charts/sluice

helm-template:
	$(GO) tool helm template sluice charts/sluice --namespace sluice-system --include-crds

## docker-build: the images sluice-manager, sluice-gateway and sluice-metrics-adapter (needs Docker).
IMAGE_TAG ?= latest
docker-build:
	for bin in manager gateway metrics-adapter; do \
		docker build -f hack/docker/Dockerfile --target $$bin -t sluice-$$bin:$(IMAGE_TAG) . ; \
	done

## lint: gofmt, go vet and golangci-lint (built from the Go module proxy on first use).
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

## bench: every benchmark, against a real Redis where one is needed.
bench: redis
	$(GO) test -run '^$$' -bench . -benchmem ./...

## demo: the whole story on a local control plane (DEMO_SHORT=1 for a shorter run).
demo:
	@hack/demo.sh

## demo-lab: the lab's six cases against the simulated provider; needs no control plane.
demo-lab:
	@hack/demo-lab.sh

## lab-variants: the queue and interactive cases in crowds unlike the lab's own (text the encoding
## counts more or less densely, spread page sizes, fast and spread latencies, clients pinned or
## spread over the gateways), the lab's crowd through ten gateways, crowds of agents sending
## transcripts of 6,000 and 20,000 tokens beside short pages, a crowd with calls near the
## provider's whole minute, and one at a provider its calls in flight hold back; about 40 minutes.
## Keeps its tables in cmd/lab/demo/variants.txt.
lab-variants:
	@OUT=bin/lab-variants hack/lab-variants.sh
	cp bin/lab-variants/variants.txt cmd/lab/demo/

## lab-failover: the failover case: a crowd's books queued for a pool of two accounts, one with a
## tenth of the other's limits, the larger down for 30 s in the middle; about 10 minutes. Keeps its
## table and chart in cmd/lab/demo/.
lab-failover:
	@OUT=bin/lab-failover hack/lab-failover.sh
	cp bin/lab-failover/failover.txt bin/lab-failover/failover/failover.png cmd/lab/demo/

## lab-overhead: what the gateway adds to a call against a bare proxy, and what tracing 1% and 100%
## of its calls adds to that; about 7 minutes. Keeps its table in cmd/lab/demo/.
lab-overhead:
	@OUT=bin/lab-overhead hack/lab-overhead.sh
	cp bin/lab-overhead/overhead.txt cmd/lab/demo/

## lab-saturation: the gateway's capacity on one core against a bare proxy's, on a closed loop and
## open-loop, for every shape of call and both stores; about 12 minutes. Keeps its tables in
## cmd/lab/demo/.
lab-saturation:
	@OUT=bin/lab-saturation hack/lab-saturation.sh
	cp bin/lab-saturation/saturation.txt cmd/lab/demo/

## lab-figures: runs demo-lab and keeps its table (with the command and the date) and the queue
## case's chart in cmd/lab/demo/, where the README links them.
lab-figures:
	@DEMO_OUT=bin/demo hack/demo-lab.sh
	cp bin/demo/table.txt bin/demo/queue.png cmd/lab/demo/

control-plane:
	@hack/build-control-plane.sh >/dev/null

redis:
	@hack/ensure-redis.sh
