# keygate — build, run and test. `make`, `make run`, `make test` (SANITIZE=1 for ASan/UBSan).
CC      ?= cc
PKGS    := libevent libevent_openssl libevent_pthreads hiredis openssl libsystemd
# no -DNDEBUG, here or in SANITIZE=1: the assert()s on the invariants stay on in every build
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Isrc \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

ifeq ($(SANITIZE),1)
# -fno-sanitize-recover: undefined behaviour aborts, so a report from the daemon fails the tests
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
BUILD   ?= build/san
else
BUILD   ?= build
endif

# src/gen/: generated sources (scripts/gen-command-table); they include src/ headers through -Isrc
SRCS     := $(wildcard src/*.c src/gen/*.c)
OBJS     := $(SRCS:src/%.c=$(BUILD)/obj/%.o)
LIB_OBJS := $(filter-out $(BUILD)/obj/main.o,$(OBJS))
HDRS     := $(wildcard src/*.h)

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRCS := $(wildcard tests/integration/test_*.c)
INTEG_BINS := $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/integration/%)
HARNESS    := tests/integration/harness.c
# tests/cluster/: suites against a real local TLS Redis Cluster (make test-cluster); not in make integration's wildcard
CLUSTER_SRCS := $(wildcard tests/cluster/test_*.c)
CLUSTER_BINS := $(CLUSTER_SRCS:tests/cluster/%.c=$(BUILD)/tests/cluster/%)
CLUSTER_HARNESS := tests/cluster/cluster_harness.c
# tests/ha/: suites against a real local Sentinel-managed deployment (make test-ha); not in make integration's wildcard
HA_SRCS := $(wildcard tests/ha/test_*.c)
HA_BINS := $(HA_SRCS:tests/ha/%.c=$(BUILD)/tests/ha/%)
HA_HARNESS := tests/ha/sentinel_harness.c
# tests/common/: what the cluster and Sentinel suites share: process handling (servers, their safety nets, ports,
# the last error), the servers' files, connections and replies (serverkit), and the checked client load
COMMON := tests/common/procs.c tests/common/serverkit.c tests/common/load.c
# The test kit: the integration harness and tests/common/, compiled once into one static library that every
# integration, cluster and HA suite links (the linker takes the members a suite uses); the cluster and Sentinel
# harnesses are compiled once each too.
TEST_HDRS    := $(wildcard tests/integration/*.h tests/common/*.h tests/cluster/*.h tests/ha/*.h)
TEST_INCS    := -Itests/integration -Itests/common -Itests/cluster -Itests/ha
TESTKIT      := $(BUILD)/tests/libtestkit.a
TESTKIT_OBJS := $(patsubst tests/%.c,$(BUILD)/tests/obj/%.o,$(HARNESS) $(COMMON))
CLUSTER_HARNESS_OBJ := $(BUILD)/tests/obj/cluster/cluster_harness.o
HA_HARNESS_OBJ      := $(BUILD)/tests/obj/ha/sentinel_harness.o

.PHONY: all deps certs run test unit integration clients check-conf check-doc-examples clean format install fuzz fuzz-quick \
        check format-check cppcheck check-layout check-layout-test check-ops deb deb-check test-cluster test-ha

all: $(BUILD)/keygate

deps:
	@./scripts/install-deps

# CPPFLAGS: empty here; a package build passes dpkg-buildflags' -D_FORTIFY_SOURCE=2 through it
$(BUILD)/obj/%.o: src/%.c $(HDRS) | $(BUILD)/obj
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/keygate: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj $(BUILD)/tests/unit $(BUILD)/tests/integration $(BUILD)/tests/cluster $(BUILD)/tests/ha:
	mkdir -p $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS) $(HDRS) $(wildcard tests/integration/*.h) $(wildcard tests/unit/*.h) | $(BUILD)/tests/unit
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

# the test kit's objects and the cluster / Sentinel harnesses: compiled once, whatever suite needs them
$(BUILD)/tests/obj/%.o: tests/%.c $(TEST_HDRS) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(TEST_INCS) -c -o $@ $<

$(TESTKIT): $(TESTKIT_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/tests/integration/%: tests/integration/%.c $(TESTKIT) $(TEST_HDRS) $(LIB_OBJS) $(HDRS) | $(BUILD)/tests/integration
	$(CC) $(CFLAGS) $(TEST_INCS) $(LDFLAGS) -o $@ $< $(TESTKIT) $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

# the cluster suites use the integration harness too (harness_tcase, cmd, expect_*, the raw RESP connection),
# and tests/common/ (procs.c under cluster_harness.c, the load): both in the test kit
$(BUILD)/tests/cluster/%: tests/cluster/%.c $(CLUSTER_HARNESS_OBJ) $(TESTKIT) $(TEST_HDRS) $(LIB_OBJS) $(HDRS) | $(BUILD)/tests/cluster
	$(CC) $(CFLAGS) $(TEST_INCS) $(LDFLAGS) -o $@ $< $(CLUSTER_HARNESS_OBJ) $(TESTKIT) $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

# the HA suites likewise
$(BUILD)/tests/ha/%: tests/ha/%.c $(HA_HARNESS_OBJ) $(TESTKIT) $(TEST_HDRS) $(LIB_OBJS) $(HDRS) | $(BUILD)/tests/ha
	$(CC) $(CFLAGS) $(TEST_INCS) $(LDFLAGS) -o $@ $< $(HA_HARNESS_OBJ) $(TESTKIT) $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

certs:
	@./scripts/gen-certs build/certs

# libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang and ASan/UBSan in build/fuzz over every
# src object but main.o. `make fuzz FUZZ_SECONDS=N` runs each for N seconds over its committed seed
# corpus tests/fuzz/corpus/<target>/ (new inputs go to build/fuzz/corpus/<target>/, findings to
# build/fuzz/<target>-crash-*); it fails on the first finding. `make fuzz-quick` is the short run of `make test`.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Isrc \
                $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
                -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_OBJS    := $(filter-out $(FUZZ_BUILD)/obj/main.o,$(SRCS:src/%.c=$(FUZZ_BUILD)/obj/%.o))

# the objects are prerequisites of a pattern rule only: keep make from deleting them as intermediates
.SECONDARY: $(FUZZ_OBJS) $(TESTKIT_OBJS) $(CLUSTER_HARNESS_OBJ) $(HA_HARNESS_OBJ)

$(FUZZ_BUILD)/obj:
	mkdir -p $@

$(FUZZ_BUILD)/obj/%.o: src/%.c $(HDRS) | $(FUZZ_BUILD)/obj
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) $(HDRS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

# halt_on_error: a sanitizer report is a finding too (libFuzzer keeps the input). Every target runs;
# the rule fails at the end when one of them found something.
fuzz: $(FUZZ_BINS)
	@fail=0; for t in $(FUZZ_BINS); do n=$$(basename $$t); \
		mkdir -p $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n; \
		echo "== $$n for $(FUZZ_SECONDS)s"; \
		if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
			-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/$$n- \
			$(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n >$(FUZZ_BUILD)/$$n.log 2>&1; then \
			grep -E '^stat::number_of_executed_units|^Done' $(FUZZ_BUILD)/$$n.log; \
		else \
			grep -E -A4 'violated|runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer: (timeout|out-of-memory))' $(FUZZ_BUILD)/$$n.log | head -n 20; \
			grep -E 'Test unit written|^stat::number_of_executed_units' $(FUZZ_BUILD)/$$n.log; \
			echo "$$n: FINDING (log $(FUZZ_BUILD)/$$n.log)"; fail=1; \
		fi; \
	done; exit $$fail

fuzz-quick:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=10

# Build, make dev certificates, start durable + cache redis-servers with TLS, run keygate on 127.0.0.1:6400.
run: deps all certs
	./scripts/run-dev $(BUILD)/keygate

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; CK_FORK=yes $$t; done

# INTEGRATION_JOBS suites at once (scripts/run-integration: longest first, each suite's output whole)
INTEGRATION_JOBS ?= 2
integration: $(BUILD)/keygate $(INTEG_BINS)
	@INTEGRATION_JOBS=$(INTEGRATION_JOBS) KEYGATE_BIN=$(BUILD)/keygate scripts/run-integration $(BUILD) $(INTEG_BINS)

# The high-availability suites: tests/cluster/test_* (each test case starts its own 3 primaries + 3 replicas
# TLS cluster) and tests/ha/test_* (each test case starts its own TLS primary, 2 replicas and 3 sentinels),
# one suite at a time (1 s cluster-node-timeout / down-after-milliseconds: two deployments side by side on a
# busy machine would fail over by themselves), through scripts/run-integration. test-cluster: the old name.
test-ha: $(BUILD)/keygate $(CLUSTER_BINS) $(HA_BINS)
	@./scripts/gen-certs build/certs >/dev/null
	@INTEGRATION_JOBS=1 KEYGATE_BIN=$(BUILD)/keygate scripts/run-integration $(BUILD) $(CLUSTER_BINS) $(HA_BINS)

test-cluster: test-ha

# Real clients (redis-py, ioredis, node-redis, redis-cli) against keygate on real TLS backends.
clients: $(BUILD)/keygate
	@KEYGATE_BIN=$(BUILD)/keygate BUILD=$(BUILD) tests/clients/run

check-conf: $(BUILD)/keygate
	$(BUILD)/keygate --check -c conf/keygate.conf

# The shell examples of README.md and docs/tutorial.md (```console blocks), run against make run's setup started
# afresh in a temporary folder under build/, each output compared (docs/testing.md, "The doc examples").
check-doc-examples: $(BUILD)/keygate
	@./scripts/check-doc-examples --keygate $(BUILD)/keygate README.md docs/tutorial.md

# The README's test command: installs what is missing, builds, runs every suite.
# The builds use both cores (BUILD_JOBS); the suites run as their targets say.
BUILD_JOBS ?= 2
test:
	@./scripts/install-deps
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) all $(UNIT_BINS) $(INTEG_BINS)
	@$(MAKE) --no-print-directory check-layout
	@./scripts/gen-certs build/certs >/dev/null
	@$(MAKE) --no-print-directory check-conf
	@$(MAKE) --no-print-directory check-doc-examples
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory check-ops
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) $(FUZZ_BINS)
	@$(MAKE) --no-print-directory fuzz-quick
	@$(MAKE) --no-print-directory clients  # last: its summary ("N passed, N failed") closes the run

# Install as a systemd service: binary, unit (its paths follow BINDIR), tmpfiles and sysusers entries,
# man pages, the monitoring files and the redis-server@ examples under the data directory,
# keygate-setup-redis (which makes those two servers: it reads the data directory), and the example config (never overwriting an
# existing /etc/keygate). DESTDIR works for packaging; without it the keygate user is created at once
# (systemd-sysusers) so the unit's User=keygate exists. debian/rules sets BINDIR=/usr/sbin and
# UNITDIR=/lib/systemd/system.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
UNITDIR ?= /etc/systemd/system
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/keygate
install: $(BUILD)/keygate
	install -D -m 0755 $(BUILD)/keygate $(DESTDIR)$(BINDIR)/keygate
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|/usr/local/bin/keygate|$(BINDIR)/keygate|g' systemd/keygate.service >$(DESTDIR)$(UNITDIR)/keygate.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/keygate.service
	install -D -m 0644 systemd/keygate-tmpfiles.conf $(DESTDIR)/usr/lib/tmpfiles.d/keygate.conf
	install -D -m 0644 systemd/keygate-sysusers.conf $(DESTDIR)/usr/lib/sysusers.d/keygate.conf
	install -D -m 0644 man/keygate.8 $(DESTDIR)$(MANDIR)/man8/keygate.8
	install -D -m 0644 man/keygate.conf.5 $(DESTDIR)$(MANDIR)/man5/keygate.conf.5
	install -D -m 0644 conf/grafana/keygate.json $(DESTDIR)$(DATADIR)/grafana/keygate.json
	install -D -m 0644 conf/prometheus/keygate-alerts.yml $(DESTDIR)$(DATADIR)/prometheus/keygate-alerts.yml
	install -D -m 0644 conf/prometheus/metric-names.txt $(DESTDIR)$(DATADIR)/prometheus/metric-names.txt
	sed 's|/usr/share/keygate|$(DATADIR)|g' scripts/keygate-setup-redis >$(DESTDIR)$(BINDIR)/keygate-setup-redis
	chmod 0755 $(DESTDIR)$(BINDIR)/keygate-setup-redis
	install -D -m 0644 man/keygate-setup-redis.8 $(DESTDIR)$(MANDIR)/man8/keygate-setup-redis.8
	install -D -m 0644 conf/redis/redis-keygate-durable.conf $(DESTDIR)$(DATADIR)/redis/redis-keygate-durable.conf
	install -D -m 0644 conf/redis/redis-keygate-cache.conf $(DESTDIR)$(DATADIR)/redis/redis-keygate-cache.conf
	@if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null 2>&1; then \
		systemd-sysusers /usr/lib/sysusers.d/keygate.conf; \
	fi
	@if [ ! -e $(DESTDIR)/etc/keygate/keygate.conf ]; then \
		install -D -m 0640 conf/keygate.conf $(DESTDIR)/etc/keygate/keygate.conf; \
		install -D -m 0640 conf/registry.conf $(DESTDIR)/etc/keygate/registry.conf; \
		echo "installed example config in $(DESTDIR)/etc/keygate: edit instances, certificates and users"; \
	fi

# The Debian package (debian/): dpkg-buildpackage -us -uc -b on a clean copy of the tree, the results in
# build/deb/ (keygate_VERSION_ARCH.deb, its -dbgsym, .buildinfo, .changes, build.log). README
# "Installing from the Debian package".
deb:
	@./scripts/install-deps --packaging
	@./scripts/build-deb build/deb

# make check's package step (tests/ops/deb-check): builds it, checks its contents and lintian, then
# installs it on this machine with apt-get, runs it, purges it, and leaves the machine as it was.
deb-check:
	@./scripts/install-deps --packaging
	@tests/ops/deb-check

# Issue 14's operator artefacts (tests/ops/run): man pages, alerts (promtool), dashboard, sysusers, make install.
check-ops: $(BUILD)/keygate
	@BUILD=$(BUILD) tests/ops/run

# ---- make check: the habits as gates (issue 11), run by .ci/run after make test.
# Every step runs, even after one failed; the summary lists each with its time, and the target
# fails when any did. The static steps come first, the long ones (sanitizers, fuzzers) last.
CHECK_STEPS := format-check cppcheck check-layout-test check-layout deb-check sanitize-integration fuzz
check:
	@./scripts/install-deps --packaging
	@fail=""; summary=""; all0=$$(date +%s); \
	for t in $(CHECK_STEPS); do \
		echo "== make check: $$t"; t0=$$(date +%s); \
		if $(MAKE) --no-print-directory $$t; then r=ok; else r=FAILED; fail="$$fail $$t"; fi; \
		summary="$$summary$$(printf '\n  %-22s %-6s %5d s' $$t $$r $$(( $$(date +%s) - t0 )))"; \
	done; \
	echo "== make check summary ($$(( $$(date +%s) - all0 )) s):$$summary"; \
	if [ -n "$$fail" ]; then echo "make check FAILED:$$fail"; exit 1; fi

# one suite at a time under the sanitizers (each is several times slower; their timing bounds
# were set for a suite that has the machine to itself there)
sanitize-integration:
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) SANITIZE=1 build/san/keygate $(INTEG_SRCS:tests/integration/%.c=build/san/tests/integration/%)
	@$(MAKE) --no-print-directory SANITIZE=1 INTEGRATION_JOBS=1 integration

# clang-format (.clang-format) over the hand-written C; src/gen/ is generated and left out.
FORMAT_FILES := $(wildcard src/*.c src/*.h tests/*/*.c tests/*/*.h)
# On a failure: the first 40 lines of clang-format's report and the list of files that differ.
format-check:
	@out=$$(clang-format --dry-run --Werror $(FORMAT_FILES) 2>&1); rc=$$?; \
	if [ $$rc -eq 0 ]; then echo "clang-format: $(words $(FORMAT_FILES)) files formatted"; exit 0; fi; \
	printf '%s\n' "$$out" | head -n 40; \
	files=$$(printf '%s\n' "$$out" | grep -E '^[^ :]+:[0-9]+:[0-9]+: error:' | cut -d: -f1 | sort -u); \
	echo "clang-format: $$(printf '%s\n' "$$files" | grep -c .) of $(words $(FORMAT_FILES)) files differ from .clang-format" \
		"($$(printf '%s\n' "$$out" | grep -cE '^[^ :]+:[0-9]+:[0-9]+: error:') places; make format rewrites them):" $$files; \
	exit 1

format:
	clang-format -i $(FORMAT_FILES)

# cppcheck over src/*.c (src/gen/ is data). scripts/cppcheck.cfg tells it the TAILQ macros and the
# out-of-memory wrappers; scripts/cppcheck-suppressions lists the false positives, each with why.
# `information` is on so that a suppression nothing matches any more fails too (unmatchedSuppression):
# the list only holds live false positives. It would also report the system headers cppcheck does
# not read, hence missingIncludeSystem.
CPPCHECK_FLAGS := --enable=warning,style,performance,portability,information --suppress=missingIncludeSystem \
                  --error-exitcode=1 --inline-suppr \
                  -q --std=c11 -I src --library=gnu --library=openssl --library=scripts/cppcheck.cfg \
                  --suppressions-list=scripts/cppcheck-suppressions \
                  --template='{file}:{line}: {severity}: {message} [{id}]'
CPPCHECK_SRCS  := $(filter-out src/gen/%,$(SRCS))
cppcheck:
	@cppcheck $(CPPCHECK_FLAGS) $(CPPCHECK_SRCS) && echo "cppcheck: $(words $(CPPCHECK_SRCS)) files clean"

# The module layers of src/LAYERS: every include and every call (read from the objects) goes down,
# and docs/architecture.md's copy of the table is the one src/LAYERS makes (scripts/check-layout --markdown).
check-layout: $(OBJS)
	@./scripts/check-layout --objects $(BUILD)/obj --readme docs/architecture.md

check-layout-test:
	@./scripts/test-check-layout

clean:
	rm -rf build

# ---- make test-chaos: the fault harness (docs/testing.md, "The fault harness") ----
# Three keygates over real TLS backends, a seeded fault schedule, a history checker. SEED=, DURATION= (s),
# FAULTS=stop,kill-stream,del-stream,trim-stream,restart,slow-link,reload (default all). TOPOLOGY=sentinel: the
# keygates over a Sentinel-managed primary (2 replicas, 3 sentinels), INCR counters, FAULTS=failover,kill-primary,
# stop-primary,stop-sentinel,restart (default all). TOPOLOGY=cluster: the keygates in front of a TLS Redis Cluster
# (3 primaries, 1 replica each), INCR/EVALSHA counters over every slot range, FAULTS=reshard,failover,kill-primary,
# stop-primary,dead-slots,restart (default these; add-node is opt-in: docs/testing.md). First the checker's own tests (hand-made histories),
# then the run; its last line is "N passed, N failed".
CHAOS_DIR  := tests/chaos
CHAOS_SRCS := $(CHAOS_DIR)/chaos.c $(CHAOS_DIR)/sentinel.c $(CHAOS_DIR)/cluster.c $(CHAOS_DIR)/runner.c \
              $(CHAOS_DIR)/checker.c $(CHAOS_DIR)/proxy.c tests/common/procs.c tests/common/serverkit.c $(HA_HARNESS) \
              $(CLUSTER_HARNESS)
CHAOS_HDRS := $(wildcard $(CHAOS_DIR)/*.h) tests/common/procs.h tests/common/serverkit.h tests/ha/sentinel_harness.h \
              tests/cluster/cluster_harness.h

$(BUILD)/tests/chaos:
	mkdir -p $@

$(BUILD)/tests/chaos/chaos: $(CHAOS_SRCS) $(CHAOS_HDRS) | $(BUILD)/tests/chaos
	$(CC) $(CFLAGS) -I$(CHAOS_DIR) -Itests/common -Itests/ha -Itests/cluster $(LDFLAGS) -o $@ $(CHAOS_SRCS) $(LDLIBS)

$(BUILD)/tests/chaos/test_checker: $(CHAOS_DIR)/test_checker.c $(CHAOS_DIR)/checker.c $(CHAOS_HDRS) | $(BUILD)/tests/chaos
	$(CC) $(CFLAGS) -I$(CHAOS_DIR) $(LDFLAGS) -o $@ $(CHAOS_DIR)/test_checker.c $(CHAOS_DIR)/checker.c $(CHECK_LIBS) $(LDLIBS)

.PHONY: test-chaos
test-chaos: $(BUILD)/keygate $(BUILD)/tests/chaos/chaos $(BUILD)/tests/chaos/test_checker
	@./scripts/gen-certs build/certs >/dev/null
	@CK_FORK=yes $(BUILD)/tests/chaos/test_checker
	@SEED=$(SEED) DURATION=$(DURATION) FAULTS=$(FAULTS) TOPOLOGY=$(TOPOLOGY) KEYGATE_BIN=$(BUILD)/keygate \
		$(BUILD)/tests/chaos/chaos

# The Sentinel topology alone (not in .ci/run: docs/testing.md, "The Sentinel topology")
.PHONY: test-chaos-sentinel
test-chaos-sentinel:
	@$(MAKE) --no-print-directory test-chaos TOPOLOGY=sentinel

# The cluster topology alone (docs/testing.md, "The cluster topology")
.PHONY: test-chaos-cluster
test-chaos-cluster:
	@$(MAKE) --no-print-directory test-chaos TOPOLOGY=cluster
