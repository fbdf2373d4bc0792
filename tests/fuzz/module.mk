# tests/fuzz/: libFuzzer targets (clang, ASan+UBSan), each with a seed corpus in
# tests/fuzz/corpus/<name>/. Built only by the fuzz targets, never by `make`/`make test`.
#   make fuzz [FUZZ_SECONDS=300] [FUZZERS="fuzz_frame ..."]   each fuzzer for FUZZ_SECONDS
#        [FUZZ_JOBS=N] [FUZZ_NICE=1]                        N at a time, under nice
#   make fuzz-ci                                            each for 60 s (CI step: 5 x 60 s)
#   make fuzz-build                                         just build them
# A run fails on any crash, leak, timeout or out-of-memory; the executions of each run are
# appended to $(BUILD)/fuzz/results.txt. Working corpora grow in $(BUILD)/fuzz/corpus/<name>
# (the committed seeds stay small), crash inputs go to $(BUILD)/fuzz/artifacts/<name>/.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_CI_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_NICE ?= 0
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_OBJ := $(FUZZ_DIR)/obj
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -g -O1 -std=gnu11 $(WARN) -fno-omit-frame-pointer -MMD -MP $(FUZZ_SAN) \
	-fsanitize=fuzzer-no-link -D_GNU_SOURCE -I$(ROOT)/liballoc/include -I$(BUILD)/gen \
	-I$(ROOT)/proto $(PROTOBUF_CFLAGS) $(EVENT_CFLAGS)
FUZZ_LDFLAGS := $(FUZZ_SAN) -fsanitize=fuzzer
FUZZERS ?= fuzz_frame fuzz_frame_live fuzz_segment fuzz_cli_parse fuzz_units

$(FUZZ_OBJ)/%.o: $(ROOT)/%.c
	$(call msg,FUZZCC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_EXTRA) -c -o $@ $<
$(FUZZ_OBJ)/gen/%.o: $(BUILD)/gen/%.c
	$(call msg,FUZZCC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-missing-prototypes -c -o $@ $<

# (a) the daemon's request path: control.c is #included by the target; the other modules
# of the daemon and the protocol code are compiled instrumented.
FUZZ_CTLD_OBJS := $(patsubst $(ROOT)/%.c,$(FUZZ_OBJ)/%.o,$(filter-out \
	$(ROOT)/ctld/main.c $(ROOT)/ctld/control.c,$(CTLD_SRCS)))
FUZZ_PROTO_OBJS := $(FUZZ_OBJ)/gen/ctl.pb-c.o $(FUZZ_OBJ)/proto/wire.o
$(FUZZ_CTLD_OBJS) $(FUZZ_PROTO_OBJS) $(FUZZ_OBJ)/tests/fuzz/fuzz_frame.o: $(PROTO_GEN_H)
$(FUZZ_OBJ)/tests/fuzz/fuzz_frame.o: FUZZ_EXTRA := -I$(ROOT)/ctld
$(FUZZ_OBJ)/ctld/dashboard.o: FUZZ_EXTRA := $(CTLD_PAGE_FLAGS) $(JANSSON_CFLAGS)
$(FUZZ_OBJ)/ctld/dashboard.o: $(CTLD_PAGE_FILES)
$(FUZZ_DIR)/fuzz_frame: $(FUZZ_OBJ)/tests/fuzz/fuzz_frame.o $(FUZZ_CTLD_OBJS) $(FUZZ_PROTO_OBJS)
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) -o $@ $^ $(FUZZ_LDFLAGS) $(CTLD_LIBS)

# (b) the segment reader
$(FUZZ_OBJ)/tests/fuzz/fuzz_segment.o: FUZZ_EXTRA := -I$(ROOT)/ctld
$(FUZZ_DIR)/fuzz_segment: $(FUZZ_OBJ)/tests/fuzz/fuzz_segment.o $(FUZZ_OBJ)/ctld/segment.o \
		$(FUZZ_OBJ)/ctld/procfs.o
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) -o $@ $^ $(FUZZ_LDFLAGS)

# (c) the CLI's parsers (its tunable table is the daemon's, ctld/units.c)
$(FUZZ_OBJ)/tests/fuzz/fuzz_cli_parse.o $(FUZZ_OBJ)/cli/fmt.o $(FUZZ_OBJ)/cli/tunable.o: \
	FUZZ_EXTRA := -I$(ROOT)/cli -I$(ROOT)/ctld
$(FUZZ_DIR)/fuzz_cli_parse: $(FUZZ_OBJ)/tests/fuzz/fuzz_cli_parse.o $(FUZZ_OBJ)/cli/fmt.o \
		$(FUZZ_OBJ)/cli/tunable.o $(FUZZ_OBJ)/ctld/units.o
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) -o $@ $^ $(FUZZ_LDFLAGS)

# (c) the daemon's unit parser and the allocator's environment/tunable parser (tunables.c
# and fatal.c compiled as in the SAN build, with LA_PREFIX=la_; la_stubs.c stands in for
# the few other allocator symbols tunables.c uses)
FUZZ_LA_FLAGS := -DLA_PREFIX=la_ -I$(ROOT)/liballoc/src -I$(ROOT)/ctld -D_LGPL_SOURCE \
	$(URCU_CFLAGS) -fno-builtin-malloc -fno-builtin-free
$(FUZZ_OBJ)/liballoc/src/tunables.o $(FUZZ_OBJ)/liballoc/src/fatal.o \
	$(FUZZ_OBJ)/tests/fuzz/fuzz_units.o $(FUZZ_OBJ)/tests/fuzz/la_stubs.o: FUZZ_EXTRA := $(FUZZ_LA_FLAGS)
$(FUZZ_DIR)/fuzz_units: $(FUZZ_OBJ)/tests/fuzz/fuzz_units.o $(FUZZ_OBJ)/tests/fuzz/la_stubs.o \
		$(FUZZ_OBJ)/ctld/units.o \
		$(FUZZ_OBJ)/liballoc/src/tunables.o $(FUZZ_OBJ)/liballoc/src/fatal.o
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) -o $@ $^ $(FUZZ_LDFLAGS)

FUZZ_BINS := $(addprefix $(FUZZ_DIR)/,$(filter-out fuzz_frame_live,$(FUZZERS)) $(if $(filter fuzz_frame_live,$(FUZZERS)),fuzz_frame))
.PHONY: fuzz fuzz-ci fuzz-build
fuzz-build: $(FUZZ_BINS) $(BUILD)/tests/fakeseg
fuzz: fuzz-build
	$(Q)FUZZ_DIR=$(abspath $(FUZZ_DIR)) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_NICE=$(FUZZ_NICE) \
		$(ROOT)/tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZERS)
fuzz-ci: fuzz-build
	$(Q)FUZZ_DIR=$(abspath $(FUZZ_DIR)) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_NICE=$(FUZZ_NICE) \
		$(ROOT)/tests/fuzz/run.sh $(FUZZ_CI_SECONDS) $(FUZZERS)

CLEAN_DIRS += $(FUZZ_DIR)

# The generator of fuzz_frame's seeds (kept with the tree; `make fuzz-seeds` rewrites
# them, e.g. after ctl.proto changed) and fuzz_segment's (segments written by fakeseg).
$(FUZZ_OBJ)/tests/fuzz/mkseeds.o: $(PROTO_GEN_H)
$(FUZZ_DIR)/mkseeds: $(FUZZ_OBJ)/tests/fuzz/mkseeds.o $(FUZZ_PROTO_OBJS)
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) -o $@ $^ $(FUZZ_SAN) $(PROTOBUF_LIBS)
.PHONY: fuzz-seeds
fuzz-seeds: $(FUZZ_DIR)/mkseeds $(BUILD)/tests/fakeseg
	$(Q)rm -rf $(ROOT)/tests/fuzz/corpus/fuzz_frame && mkdir -p $(ROOT)/tests/fuzz/corpus/fuzz_frame
	$(Q)$(FUZZ_DIR)/mkseeds $(ROOT)/tests/fuzz/corpus/fuzz_frame
	$(Q)$(ROOT)/tests/fuzz/segment-seeds.sh $(BUILD)/tests/fakeseg $(ROOT)/tests/fuzz/corpus/fuzz_segment
