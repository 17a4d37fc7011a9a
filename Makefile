# shardns — see README.md. `make run` serves the demo cluster; `make test`
# runs every test tier, installing what the tests need.

GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/shardns/shardns/node.Version=$(VERSION)
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /integration)

.PHONY: build run test unit integration fuzz check-fmt vet deps bench clean image proto soak node-test

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/shardns ./cmd/shardns

run: build
	bin/shardns serve --config deploy/local/shardns.yaml

## test: everything CI runs — format, vet, unit tier with -race, fuzzing, integration tier.
test: deps check-fmt vet unit fuzz integration

## unit: the fast tier, for iteration.
unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

## integration: the built binary over real sockets with real clients, and deploy/
## on a one-node Kubernetes cluster (TestNode, skipped without root and Docker):
## the tiers integration/functional, cluster, nodetier and bench (each package's
## doc.go lists its switches), one package at a time (-p 1), as each alone loads
## the 2-core machine it was written for.
integration: build
	SHARDNS_NODE_TEST=1 $(GO) test -p 1 -count=1 -timeout 50m ./integration/...

## fuzz: each fuzz target for FUZZTIME (seed corpora are in testdata/fuzz); a run
## that only hit Go 1.26's fuzz deadline race is run again (see scripts/fuzz.sh).
FUZZTIME ?= 20s
FUZZ_TARGETS = FuzzServe:./query FuzzParse:./config FuzzParse:./sources/manifest \
	FuzzService:./sources/kubeobj FuzzEndpointSlice:./sources/kubeobj FuzzServiceEntry:./sources/kubeobj \
	FuzzScope:./listeners FuzzMatchQuestion:./listeners FuzzParse:./corefile FuzzParse:./sources/zonefile FuzzThaw:./model \
	FuzzMessageScanner:./cluster/trust FuzzPreamble:./cluster/membership
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(FUZZ_TARGETS)

check-fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## deps: install the Debian packages the tests use (dig, dnsperf).
deps:
	scripts/deps.sh

## bench: dnsperf against shardns and CoreDNS side by side on a real apiserver with
## 1k services (queries per server CPU-second and their ratio, CPU at 20k qps,
## latency, RSS; CoreDNS is built once by integration/scripts/build-coredns.sh),
## the same two over every transport: TCP with connections kept and with a new
## connection per query, DNS over TLS and DNS over HTTPS/2 (queries per server
## CPU-second, the load generator's CPU, cores and p50/p99 at 2k q/s, two
## alternating rounds; about 4 minutes), a static zone of 1,000 names from a zone
## file against Knot DNS with one UDP worker and CoreDNS's file plugin (the median
## of 5 rotating rounds; skipped without knotd, which scripts/deps.sh installs),
## a node-local process against CoreDNS with NodeLocal DNSCache's Corefile on the
## same cached questions (queries per server CPU-second and their ratio), one
## server block against NodeLocal DNSCache's four on the same zone files (the
## median ratio of 7 alternating rounds: what a chain per block costs),
## Go benchmarks with -benchmem, the added latency of asking another replica, and
## how long queries fail when one of three replicas (rf 1) is killed under load, and
## sharded watches against CoreDNS: RSS at 10k and 20k services with 3 and 6 replicas (at rest, and at 20k × 6 in use),
## CPU and watch events under SHARDNS_CHURN (10m) of EndpointSlice updates, the
## largest replica's peak RSS through start, an apiserver restart and a ring change
## beside CoreDNS's, with and without sharded watches (20k services), floods: a
## water torture at 50k q/s (SHARDNS_FLOOD_RATE) and an ANY flood beside a client
## asking 1k q/s, against shardns with and without the recommended limits and
## CoreDNS (the client's success rate, p50/p99 latency, server CPU), and the
## scale curve: 3 and 6 replicas, with and without sharded watches, beside CoreDNS
## at SCALE services × 10 endpoints (peak and steady RSS of the largest replica,
## time to /ready, CPU to sync), written to SCALE_OUT (bench-scale.tsv) for
## `go run ./scripts/scalecurve < bench-scale.tsv > docs/scale-curve.svg`.
## The services are written into etcd (100k in under a minute); the whole curve
## takes about 20 minutes on the 2-core machine (docs/performance.md#a-scale-curve),
## `make bench SCALE=5k,20k` keeps to the small points. And the node tier: three keyed
## replicas (rf 1) under 100 EndpointSlice updates a second while one process simulates
## NODES node-local caches (each its own remote address and the node-local credential,
## the ring asked every second, ten names asked of the owners as their TTL runs out),
## with invalidations and without: the replicas' CPU and RSS (per 1k nodes), the
## invalidations a node gets and the time from a change to a node told of it, a real
## node-local process's hit rate; rows to NODES_OUT (bench-node-tier.tsv) for
## `go run ./scripts/nodetiercurve < bench-node-tier.tsv > docs/node-tier-scale.svg`
## (about 12 minutes; docs/performance.md#what-the-node-local-tier-costs-the-replicas).
SCALE ?= 5k,20k,50k,100k
SCALE_OUT ?= $(CURDIR)/bench-scale.tsv
NODES ?= 0,500,1000,1500,2000
NODES_OUT ?= $(CURDIR)/bench-node-tier.tsv
bench: deps build
	bash -o pipefail -c "SHARDNS_BENCH=1 SHARDNS_SCALE=$(SCALE) SHARDNS_SCALE_OUT=$(SCALE_OUT) SHARDNS_NODES=$(NODES) SHARDNS_NODE_TIER_OUT=$(NODES_OUT) $(GO) test -p 1 -count=1 -v -timeout 360m -run '^(TestDNSPerf|TestTransportPerf|TestStaticZonePerf|TestNodeLocalPerf|TestBlocksPerf|TestShardedMemory|TestShardedIngest|TestKillWindow|TestFloodBench|TestPeakMemory|TestScaleCurve|TestNodeTierScale)\$$' ./integration/bench ./integration/cluster | grep -E '(perf|memory|ingest_bench|failover|flood_bench|flood|scale)_test|^(ok|FAIL|---)'"

	$(GO) test -run '^$$' -bench . -benchmem ./zone ./query ./listeners ./cache ./model ./actors/zonemanager ./sources/kubernetes
	$(GO) test -p 1 -run '^$$' -bench 'BenchmarkClusterDispatch|BenchmarkNodeLocal' -benchtime 3000x ./integration/cluster ./integration/functional

## soak: SOAK_DURATION (10m) of mixed queries and 10 Service changes per second
## against 3 replica processes on a real apiserver, printing each replica's RSS and
## goroutines every minute; fails on a wrong answer or growth past the bounds in
## integration/bench/soak_test.go. Not part of `make test`.
SOAK_DURATION ?= 10m
soak: build
	bash -o pipefail -c "SHARDNS_SOAK=1 SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -v -timeout 3h \
		-run '^TestSoak\$$' ./integration/bench | grep -E 'soak_test|^(ok|FAIL|---|panic)'"

## node-test: only the node tier of `make integration`: deploy/ on a real one-node
## Kubernetes cluster that integration/kubenode brings up on this machine (kubelet,
## containerd, kube-proxy, the control plane): `kubectl apply -k deploy/`, names
## resolved from pods through kubelet's cluster DNS, scaling and a rolling update
## under queries, strangers refused, the node-local overlay, the switch from
## CoreDNS and back, the Helm chart's install, upgrade and rollback. Needs root
## and Docker (skipped without); integration/scripts/build-node.sh builds kubelet
## & co. once. `go test` runs it
## only with SHARDNS_NODE_TEST=1: it changes the host's network while it runs.
node-test: deps build
	SHARDNS_NODE_TEST=1 $(GO) test -count=1 -v -timeout 40m -run '^TestNode$$' ./integration/nodetier

## image: container image shardns:$(VERSION) and shardns:latest, FROM scratch (see deploy/README.md).
image:
	VERSION=$(VERSION) GO=$(GO) scripts/image.sh

## proto: regenerate cluster/wire/wire.pb.go (needs protoc from Debian's protobuf-compiler).
proto:
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	PATH=$(CURDIR)/bin:$$PATH protoc --go_out=. --go_opt=paths=source_relative cluster/wire/wire.proto

clean:
	rm -rf bin
