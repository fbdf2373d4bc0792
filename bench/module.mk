# bench/: the benchmark suite behind `make bench` (issue 8). Workload programs (bench/*.c,
# plain malloc API) are built into $(BUILD)/bench/; bench/run.py runs them under every
# allocator (glibc, jemalloc, tcmalloc, mimalloc, and liballoc once $(BUILD)/liballoc.so
# exists), interleaved, and writes $(BUILD)/bench/results.{csv,json} plus PNG charts.
#   make bench [QUICK=1]       run and print the table
#   make bench-results         run and rewrite bench/RESULTS.md (REUSE=1: from the last run)
BENCH_BIN := $(BUILD)/bench
BENCH_LIB_SRC := $(ROOT)/bench/benchlib.c
BENCH_SPECIAL := $(ROOT)/bench/glibc_shim.c $(ROOT)/bench/ctl_client.c $(BENCH_LIB_SRC)
BENCH_PROG_SRCS := $(filter-out $(BENCH_SPECIAL),$(sort $(wildcard $(ROOT)/bench/*.c)))
BENCH_PROGS := $(patsubst $(ROOT)/bench/%.c,$(BENCH_BIN)/%,$(BENCH_PROG_SRCS))
BENCH_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(BENCH_PROG_SRCS) $(BENCH_LIB_SRC))
BENCH_CFLAGS := -I$(ROOT)/bench -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-free \
	-fno-builtin-realloc
$(BENCH_OBJS): EXTRA_CFLAGS := $(BENCH_CFLAGS)
$(BUILD)/obj/bench/glibc_shim.o: EXTRA_CFLAGS := -fPIC -fvisibility=hidden $(BENCH_CFLAGS)
$(BUILD)/obj/bench/ctl_client.o: EXTRA_CFLAGS := $(BENCH_CFLAGS) $(PROTOBUF_CFLAGS)
$(BUILD)/obj/bench/ctl_client.o: $(PROTO_GEN_H)

$(BENCH_BIN)/%: $(BUILD)/obj/bench/%.o $(BUILD)/obj/bench/benchlib.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lpthread -ldl -lm

$(BENCH_BIN)/ctl_client: $(BUILD)/obj/bench/ctl_client.o $(BUILD)/obj/bench/benchlib.o \
		$(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(PROTOBUF_LIBS)

$(BENCH_BIN)/libglibc_shim.so: $(BUILD)/obj/bench/glibc_shim.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS) -ldl

# tests/e2e/bench_usage.bats runs the programs' usage errors (not in sanitizer builds)
ifeq ($(SAN),)
test: $(BENCH_PROGS) $(BENCH_BIN)/ctl_client
endif

# the fork loop of issue 19 runs the stress program tests/stress/forkfree.c
BENCH_ALL := $(BENCH_PROGS) $(BENCH_BIN)/ctl_client $(BENCH_BIN)/libglibc_shim.so \
	$(BUILD)/tests/forkfree
# the daemon-under-attack figures (ctld/attack-bench.sh)
BENCH_ALL += $(BUILD)/tests/massseg $(BUILD)/tests/ctlclient
# issue 20: the services of the policy figures (bench/policy_bench.py)
BENCH_ALL += $(BUILD)/tests/pressure_svc
BENCH_RUN := python3 $(ROOT)/bench/run.py --root $(ROOT) --build $(abspath $(BUILD)) \
	$(if $(filter 1 yes,$(QUICK)),--quick)

# liballoc is benchmarked when it builds; a liballoc that does not build yet (work in
# progress) leaves its column out instead of stopping the suite. Likewise allocctld and
# allocctl: without them the control-path figures read n/a. The statistics-overhead figure
# needs a second build with statistics compiled out (LA_NO_STATS=1, in $(BUILD)/nostats).
BENCH_CTL_TARGETS = $(filter $(BUILD)/allocctld $(BUILD)/allocctl,$(ALL_TARGETS))
define bench_build_liballoc
	$(if $(LIBALLOC_SRCS),$(Q)$(MAKE) --no-print-directory DEPS=0 $(BUILD)/liballoc.so || \
		echo "bench: liballoc did not build: benchmarking the other allocators only" >&2)
	$(if $(LIBALLOC_SRCS),$(Q)$(MAKE) --no-print-directory DEPS=0 LA_NO_STATS=1 \
		BUILD=$(BUILD)/nostats $(BUILD)/nostats/liballoc.so || \
		echo "bench: the LA_NO_STATS=1 build failed: no statistics-overhead figure" >&2)
	$(if $(BENCH_CTL_TARGETS),$(Q)$(MAKE) --no-print-directory DEPS=0 $(BENCH_CTL_TARGETS) || \
		echo "bench: allocctld/allocctl did not build: control-path figures n/a" >&2)
endef

.PHONY: bench-results
bench: $(BENCH_ALL)
	$(bench_build_liballoc)
	$(Q)$(BENCH_RUN)

bench-results: $(BENCH_ALL)
	$(if $(filter 1 yes,$(REUSE)),,$(bench_build_liballoc))
	$(Q)$(BENCH_RUN) --results-md $(ROOT)/bench/RESULTS.md $(if $(filter 1 yes,$(REUSE)),--reuse)
