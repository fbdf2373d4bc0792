# tests/: every suite, run by `make test` through prove (scripts/tap-exec.sh dispatches).
#   tests/unit/*.c    Criterion, linked with the allocator's objects (reaches internals)
#   tests/api/*.c     Criterion, public API only: built twice, linked with liballoc.a and
#                     plain (run under LD_PRELOAD=liballoc.so); in SAN builds only linked
#   tests/stress/*.c  standalone programs taking THREADS SCALE ROUNDS; driven by *.bats
#   tests/helpers/*.c small programs the shell suites run (workloads, fake segments)
#   tests/e2e/*.bats  end-to-end shell suites (bats, TAP)
TESTS_BIN := $(BUILD)/tests
UNIT_SRCS := $(sort $(wildcard $(ROOT)/tests/unit/*.c))
API_SRCS := $(sort $(wildcard $(ROOT)/tests/api/*.c))
STRESS_SRCS := $(sort $(wildcard $(ROOT)/tests/stress/*.c))
HELPER_SRCS := $(sort $(wildcard $(ROOT)/tests/helpers/*.c))

UNIT_BINS := $(patsubst $(ROOT)/tests/unit/%.c,$(TESTS_BIN)/criterion/%,$(UNIT_SRCS))
API_LINKED_BINS := $(patsubst $(ROOT)/tests/api/%.c,$(TESTS_BIN)/criterion/%.linked,$(API_SRCS))
API_PRELOAD_BINS := $(patsubst $(ROOT)/tests/api/%.c,$(TESTS_BIN)/criterion/%.preload,$(API_SRCS))
STRESS_BINS := $(patsubst $(ROOT)/tests/stress/%.c,$(TESTS_BIN)/%,$(STRESS_SRCS))
HELPER_BINS := $(patsubst $(ROOT)/tests/helpers/%.c,$(TESTS_BIN)/%,$(HELPER_SRCS))

TEST_CFLAGS := $(CRITERION_CFLAGS) -I$(ROOT)/tests -I$(ROOT)/liballoc/src -fno-builtin-malloc \
	-fno-builtin-calloc -fno-builtin-free -fno-builtin-realloc -Wno-missing-prototypes
ifneq ($(SAN),)
TEST_CFLAGS += -DLA_PREFIX=la_
endif
$(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(UNIT_SRCS) $(API_SRCS) $(STRESS_SRCS) $(HELPER_SRCS)): \
	EXTRA_CFLAGS := $(TEST_CFLAGS) -D_LGPL_SOURCE $(URCU_CFLAGS)

$(TESTS_BIN)/criterion/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/liballoc.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(BUILD)/liballoc.a $(LDFLAGS) $(CRITERION_LIBS) -lpthread

$(TESTS_BIN)/criterion/%.linked: $(BUILD)/obj/tests/api/%.o $(BUILD)/liballoc.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(BUILD)/liballoc.a $(LDFLAGS) $(CRITERION_LIBS) -lpthread -ldl

$(TESTS_BIN)/criterion/%.preload: $(BUILD)/obj/tests/api/%.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(LDFLAGS) $(CRITERION_LIBS) -lpthread -ldl

# Stress programs and helpers use the process's malloc: preload liballoc (or, in SAN builds,
# they are linked with the prefixed allocator and call it through tests/api/api.h).
$(TESTS_BIN)/%: $(BUILD)/obj/tests/stress/%.o $(if $(SAN),$(BUILD)/liballoc.a)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lpthread

$(TESTS_BIN)/%: $(BUILD)/obj/tests/helpers/%.o $(if $(SAN),$(BUILD)/liballoc.a)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lpthread

# massseg forks a child per segment (5,000 in segments.bats) that only waits in pause():
# built with ThreadSanitizer, each child starts the runtime's background thread, which wakes
# ten times a second, and 5,000 of them made the forks themselves crawl (load ~2,000 on 2
# cores, the 5,000 not out in 360 s in the TSan job; 2,000 took 40 s, 500 2.3 s). It uses
# neither the allocator nor threads: built without the sanitizer in every build (the
# daemon that reads its segments is the code under test).
$(TESTS_BIN)/massseg: $(ROOT)/tests/helpers/massseg.c
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(filter-out $(SAN_FLAGS),$(CFLAGS)) $(CPPFLAGS) $(TEST_CFLAGS) \
		$(filter-out $(SAN_FLAGS),$(LDFLAGS))

# tests/helpers/shim/*.c: libraries preloaded ahead of the allocator (tests/e2e/interpose.bats),
# lib<name>.so; not in sanitizer builds (the suites that preload them do not run there)
SHIM_SRCS := $(sort $(wildcard $(ROOT)/tests/helpers/shim/*.c))
SHIM_LIBS := $(patsubst $(ROOT)/tests/helpers/shim/%.c,$(TESTS_BIN)/lib%.so,$(SHIM_SRCS))
$(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(SHIM_SRCS)): EXTRA_CFLAGS := -fPIC -fvisibility=hidden \
	-I$(ROOT)/tests -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-free -fno-builtin-realloc
$(TESTS_BIN)/lib%.so: $(BUILD)/obj/tests/helpers/shim/%.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS) -ldl

TEST_BINS += $(UNIT_BINS) $(API_LINKED_BINS) $(if $(SAN),,$(API_PRELOAD_BINS)) $(STRESS_BINS) $(HELPER_BINS) \
	$(if $(SAN),,$(SHIM_LIBS))

# Suites registered by other fragments go into TEST_BINS / TEST_DEPS as well.
test: all $(TEST_BINS) $(TEST_DEPS)
	$(Q)ROOT=$(ROOT) BUILD=$(abspath $(BUILD)) SAN=$(SAN) $(ROOT)/scripts/run-tests.sh

# segtool reads segments through the daemon's reader API (ctld/segment.o, no libevent).
$(BUILD)/obj/tests/helpers/segtool.o: EXTRA_CFLAGS += -I$(ROOT)/ctld
$(TESTS_BIN)/segtool: $(BUILD)/obj/tests/helpers/segtool.o $(BUILD)/obj/ctld/segment.o $(BUILD)/obj/ctld/procfs.o \
		$(BUILD)/obj/ctld/units.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lpthread

# forkfree drives its own control thread through its mailbox with the daemon's client code.
$(BUILD)/obj/tests/stress/forkfree.o: EXTRA_CFLAGS += -I$(ROOT)/ctld
$(TESTS_BIN)/forkfree: $(BUILD)/obj/tests/stress/forkfree.o $(BUILD)/obj/ctld/segment.o \
		$(BUILD)/obj/ctld/procfs.o \
		$(if $(SAN),$(BUILD)/liballoc.a)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lpthread

# jemalloc_user links Debian's libjemalloc2 (a program with an allocator of its own, as
# redis-server is): liballoc must say it serves that program's malloc (tests/e2e/envparse.bats).
$(TESTS_BIN)/jemalloc_user: $(BUILD)/obj/tests/helpers/jemalloc_user.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -Wl,--no-as-needed -l:libjemalloc.so.2 -lpthread
