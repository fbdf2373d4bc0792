# ctld/: allocctld, the sidecar daemon (libevent loop, control socket, HTTP /metrics), and
# the reader objects (segment.o, procfs.o, units.o) the CLI and the fuzzers may link without libevent.
# Its unit tests (tests/ctld/*.c, Criterion) are built to $(BUILD)/tests/criterion/ctld_<name>.
CTLD_SRCS := $(sort $(wildcard $(ROOT)/ctld/*.c))
CTLD_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(CTLD_SRCS))
CTLD_READER_OBJS := $(BUILD)/obj/ctld/segment.o $(BUILD)/obj/ctld/procfs.o $(BUILD)/obj/ctld/units.o
CTLD_LIB_OBJS := $(filter-out $(BUILD)/obj/ctld/main.o,$(CTLD_OBJS))
# libraries of the daemon's modules: the loop, the protocol, the journal (audit.c), JSON
# (dashboard.c), the configuration file's sections (config.c)
CTLD_LIBS := $(EVENT_LIBS) $(PROTOBUF_LIBS) $(SYSTEMD_LIBS) $(JANSSON_LIBS) $(INIH_LIBS)

$(CTLD_OBJS): EXTRA_CFLAGS := $(EVENT_CFLAGS) $(PROTOBUF_CFLAGS) $(JANSSON_CFLAGS)
$(CTLD_OBJS): $(PROTO_GEN_H)
# The dashboard page (ctld/page/) is embedded into the binary at build time (.incbin).
CTLD_PAGE_FILES := $(wildcard $(ROOT)/ctld/page/*)
CTLD_PAGE_FLAGS := -DCTLD_PAGE_DIR='"$(ROOT)/ctld/page"'
$(BUILD)/obj/ctld/dashboard.o: EXTRA_CFLAGS += $(CTLD_PAGE_FLAGS)
$(BUILD)/obj/ctld/dashboard.o: $(CTLD_PAGE_FILES)

$(BUILD)/allocctld: $(CTLD_OBJS) $(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)$(CC) -o $@ $(CTLD_OBJS) $(BUILD)/libctlproto.a $(LDFLAGS) $(CTLD_LIBS)

ALL_TARGETS += $(BUILD)/allocctld
INSTALL_BIN += $(BUILD)/allocctld
INSTALL_UNITS += $(ROOT)/ctld/allocctld.service

# Unit tests of the daemon's modules.
CTLD_TEST_SRCS := $(sort $(wildcard $(ROOT)/tests/ctld/*.c))
CTLD_TEST_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(CTLD_TEST_SRCS))
CTLD_TEST_BINS := $(patsubst $(ROOT)/tests/ctld/%.c,$(BUILD)/tests/criterion/ctld_%,$(CTLD_TEST_SRCS))
$(CTLD_TEST_OBJS): EXTRA_CFLAGS := $(CRITERION_CFLAGS) $(EVENT_CFLAGS) $(PROTOBUF_CFLAGS) \
	-I$(ROOT)/ctld -Wno-missing-prototypes
$(CTLD_TEST_OBJS): $(PROTO_GEN_H)

$(BUILD)/tests/criterion/ctld_%: $(BUILD)/obj/tests/ctld/%.o $(CTLD_LIB_OBJS) $(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(CTLD_LIB_OBJS) $(BUILD)/libctlproto.a $(LDFLAGS) $(CRITERION_LIBS) \
		$(CTLD_LIBS) -lpthread

TEST_BINS += $(CTLD_TEST_BINS)
# the e2e suites (tests/e2e/ctld_*.bats) need the daemon, the fake segments and the CLI-less
# client helper
TEST_DEPS += $(BUILD)/allocctld $(BUILD)/tests/fakeseg $(BUILD)/tests/ctlclient

# The test client (tests only, not installed).
$(BUILD)/obj/ctld/tools/ctlclient.o: EXTRA_CFLAGS := $(PROTOBUF_CFLAGS)
$(BUILD)/obj/ctld/tools/ctlclient.o: $(PROTO_GEN_H)
$(BUILD)/tests/ctlclient: $(BUILD)/obj/ctld/tools/ctlclient.o $(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(PROTOBUF_LIBS)
