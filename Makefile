# liballoc — one non-recursive Makefile, building out of tree into $(BUILD).
# Each directory contributes a fragment (*/module.mk) included below; there is one make
# process and one dependency graph. Quiet unless V=1.
#
#   make            build liballoc.so/.a, allocctld, allocctl
#   make test       build and run every test suite (prove summarizes)
#   make asan       the same tests with ASan+UBSan builds, in build/asan
#   make tsan       the same tests with TSan builds, in build/tsan (suites marked
#                   "# san: skip" preload liballoc.so into programs, which a sanitizer
#                   build's prefixed la_malloc cannot serve: they do not run under either
#                   sanitizer; README.md, limits, says what tests/policy/inprocess.bats
#                   does under TSan and why it is not a race)
#   make bench      the benchmark suite (QUICK=1 for the short form)
#   make demo       the main job: daemon + a preloaded service + the CLI
#   make format     clang-format the tree;  make format-check  verify it
#   make install PREFIX=/usr/local
.DEFAULT_GOAL := all
SHELL := /bin/bash
# `make`, `make test`, `make asan`/`tsan` compile with one job per CPU unless the command
# line sets -j (make -j1 stays serial): `make test` alone, the README's command, built its
# ~90 test and benchmark programs one at a time. Not with other goals (`make clean all`
# would run the two at once; `make bench` measures) nor in a sub-make (it shares its
# parent's jobs).
ifeq ($(MAKELEVEL),0)
ifeq ($(filter-out all test asan tsan,$(or $(MAKECMDGOALS),all)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
endif

ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
SAN ?=
ifeq ($(SAN),)
BUILD ?= build
else
BUILD ?= build/$(SAN)
endif
PREFIX ?= /usr/local
V ?= 0
ifeq ($(V),0)
Q := @
msg = @printf '  %-8s %s\n' '$(1)' '$(2)';
else
Q :=
msg =
endif

# Packages install themselves when missing (one printed apt-get step). DEPS=0 skips.
DEPS ?= 1
ifeq ($(DEPS),1)
ifneq ($(filter-out clean format format-check help,$(or $(MAKECMDGOALS),all)),)
DEPS_GROUPS := build
ifneq ($(filter demo,$(MAKECMDGOALS)),)
DEPS_GROUPS += demo
endif
ifneq ($(filter test asan tsan check fuzz fuzz-ci,$(MAKECMDGOALS)),)
DEPS_GROUPS += test
endif
ifneq ($(filter bench bench-results,$(MAKECMDGOALS)),)
DEPS_GROUPS += test bench
endif
ifneq ($(filter fuzz fuzz-ci,$(MAKECMDGOALS)),)
DEPS_GROUPS += fuzz
endif
$(if $(shell $(ROOT)/scripts/deps.sh $(DEPS_GROUPS) >&2 || echo fail),$(error installing dependencies failed))
endif
endif

CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
PKG_CONFIG ?= pkg-config
OPT ?= -O2
WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wundef -Wvla -Wno-unused-parameter
CSTD := -std=gnu11
CPPFLAGS += -D_GNU_SOURCE -I$(ROOT)/liballoc/include -I$(BUILD)/gen -I$(ROOT)/proto
CFLAGS ?= $(OPT) -g
CFLAGS += $(CSTD) $(WARN) -fno-omit-frame-pointer -MMD -MP

SAN_FLAGS :=
ifeq ($(SAN),asan)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined
else ifeq ($(SAN),tsan)
SAN_FLAGS := -fsanitize=thread
endif
CFLAGS += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)

EVENT_CFLAGS := $(shell $(PKG_CONFIG) --cflags libevent 2>/dev/null)
EVENT_LIBS := $(shell $(PKG_CONFIG) --libs libevent 2>/dev/null)
PROTOBUF_CFLAGS := $(shell $(PKG_CONFIG) --cflags libprotobuf-c 2>/dev/null)
PROTOBUF_LIBS := $(shell $(PKG_CONFIG) --libs libprotobuf-c 2>/dev/null)
URCU_CFLAGS := $(shell $(PKG_CONFIG) --cflags liburcu 2>/dev/null)
SYSTEMD_LIBS := $(shell $(PKG_CONFIG) --libs libsystemd 2>/dev/null)
INIH_LIBS := $(shell $(PKG_CONFIG) --libs inih 2>/dev/null)
JANSSON_CFLAGS := $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)
CRITERION_CFLAGS := $(shell $(PKG_CONFIG) --cflags criterion 2>/dev/null)
CRITERION_LIBS := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null)

ALL_TARGETS :=
TEST_TARGETS :=
CLEAN_DIRS := build

# Generic compile rule: $(BUILD)/obj/<path>.o from <path>.c
$(BUILD)/obj/%.o: $(ROOT)/%.c
	$(call msg,CC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(EXTRA_CFLAGS) -c -o $@ $<

# Fragments, in dependency order.
include $(ROOT)/proto/module.mk
include $(ROOT)/liballoc/module.mk
-include $(ROOT)/ctld/module.mk
-include $(ROOT)/cli/module.mk
include $(ROOT)/tests/module.mk
-include $(ROOT)/tests/reliability/module.mk
-include $(ROOT)/tests/fuzz/module.mk
-include $(ROOT)/bench/module.mk

.PHONY: all test asan tsan bench demo format format-check install clean help
all: $(ALL_TARGETS)

asan:
	$(Q)$(MAKE) --no-print-directory SAN=asan test
tsan:
	$(Q)$(MAKE) --no-print-directory SAN=tsan test

demo: all
	$(Q)BUILD=$(BUILD) $(ROOT)/scripts/demo.sh

FORMAT_FILES = $(shell cd $(ROOT) && git ls-files --cached --others --exclude-standard -- '*.c' '*.h' 2>/dev/null)
format:
	$(Q)cd $(ROOT) && clang-format -i $(FORMAT_FILES)
format-check:
	$(Q)cd $(ROOT) && clang-format --dry-run --Werror $(FORMAT_FILES)

install: all
	$(Q)install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib/systemd/system \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/liballoc
	$(Q)install -m 0755 $(BUILD)/liballoc.so $(DESTDIR)$(PREFIX)/lib/liballoc.so
	$(Q)install -m 0644 $(BUILD)/liballoc.a $(DESTDIR)$(PREFIX)/lib/liballoc.a
	$(Q)install -m 0644 $(ROOT)/liballoc/include/liballoc.h $(ROOT)/liballoc/include/liballoc_shm.h \
		$(DESTDIR)$(PREFIX)/include/
	$(Q)for f in $(INSTALL_BIN); do install -m 0755 $$f $(DESTDIR)$(PREFIX)/bin/; done
	$(Q)for f in $(INSTALL_MAN1); do install -m 0644 $$f $(DESTDIR)$(PREFIX)/share/man/man1/; done
	$(Q)for f in $(INSTALL_UNITS); do install -m 0644 $$f $(DESTDIR)$(PREFIX)/lib/systemd/system/; done
	$(Q)install -m 0644 $(ROOT)/cli/allocctl.bash-completion \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/allocctl
	$(Q)install -m 0644 $(ROOT)/cli/schema/allocctl-json-1.schema.json $(DESTDIR)$(PREFIX)/share/liballoc/

clean:
	$(Q)rm -rf $(CLEAN_DIRS)

help:
	@sed -n '2,13p' $(ROOT)/Makefile

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
