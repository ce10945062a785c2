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

SRCS     := $(wildcard src/*.c)
OBJS     := $(SRCS:src/%.c=$(BUILD)/obj/%.o)
LIB_OBJS := $(filter-out $(BUILD)/obj/main.o,$(OBJS))
HDRS     := $(wildcard src/*.h)

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRCS := $(wildcard tests/integration/test_*.c)
INTEG_BINS := $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/integration/%)
HARNESS    := tests/integration/harness.c

.PHONY: all deps certs run test unit integration clients check-conf clean format install

all: $(BUILD)/keygate

deps:
	@./scripts/install-deps

$(BUILD)/obj/%.o: src/%.c $(HDRS) | $(BUILD)/obj
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/keygate: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj $(BUILD)/tests/unit $(BUILD)/tests/integration:
	mkdir -p $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS) $(HDRS) $(wildcard tests/integration/*.h) $(wildcard tests/unit/*.h) | $(BUILD)/tests/unit
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tests/integration/%: tests/integration/%.c $(HARNESS) $(wildcard tests/integration/*.h) $(LIB_OBJS) $(HDRS) | $(BUILD)/tests/integration
	$(CC) $(CFLAGS) -Itests/integration $(LDFLAGS) -o $@ $< $(HARNESS) $(LIB_OBJS) $(CHECK_LIBS) $(LDLIBS)

certs:
	@./scripts/gen-certs build/certs

# Build, make dev certificates, start durable + cache redis-servers with TLS, run keygate on 127.0.0.1:6400.
run: deps all certs
	./scripts/run-dev $(BUILD)/keygate

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; CK_FORK=yes $$t; done

integration: $(BUILD)/keygate $(INTEG_BINS)
	@set -e; for t in $(INTEG_BINS); do echo "== $$t"; KEYGATE_BIN=$(BUILD)/keygate $$t; done

# Real clients (redis-py, ioredis, node-redis, redis-cli) against keygate on real TLS backends.
clients: $(BUILD)/keygate
	@KEYGATE_BIN=$(BUILD)/keygate BUILD=$(BUILD) tests/clients/run

check-conf: $(BUILD)/keygate
	$(BUILD)/keygate --check -c conf/keygate.conf

# The README's test command: installs what is missing, builds, runs every suite.
test:
	@./scripts/install-deps
	@$(MAKE) --no-print-directory all
	@./scripts/gen-certs build/certs >/dev/null
	@$(MAKE) --no-print-directory check-conf
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory clients

# Install as a systemd service: binary, unit, tmpfiles entry, and the example config
# (never overwriting an existing /etc/keygate). DESTDIR works for packaging.
PREFIX ?= /usr/local
install: $(BUILD)/keygate
	install -D -m 0755 $(BUILD)/keygate $(DESTDIR)$(PREFIX)/bin/keygate
	install -D -m 0644 systemd/keygate.service $(DESTDIR)/etc/systemd/system/keygate.service
	install -D -m 0644 systemd/keygate-tmpfiles.conf $(DESTDIR)/usr/lib/tmpfiles.d/keygate.conf
	@if [ ! -e $(DESTDIR)/etc/keygate/keygate.conf ]; then \
		install -D -m 0640 conf/keygate.conf $(DESTDIR)/etc/keygate/keygate.conf; \
		install -D -m 0640 conf/registry.conf $(DESTDIR)/etc/keygate/registry.conf; \
		echo "installed example config in $(DESTDIR)/etc/keygate: edit instances, certificates and users"; \
	fi

format:
	clang-format -i src/*.c src/*.h tests/unit/*.c tests/integration/*.c

clean:
	rm -rf build
