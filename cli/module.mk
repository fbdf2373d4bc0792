# cli/: allocctl, the operator's tool (talks only to allocctld, through proto/wire.h).
#   $(BUILD)/allocctl                   the program
#   $(BUILD)/tests/criterion/cli_<n>    Criterion tests of tests/cli/<n>.c (parsers, renderers)
#   $(BUILD)/tests/cli/fake-ctld        a scripted stand-in daemon for tests/e2e/cli_*.bats
ALLOCCTL_VERSION ?= 0.1.0
CLI_LIB_SRCS := $(addprefix $(ROOT)/cli/,fmt.c tunable.c json.c render.c client.c top.c \
	history.c)
# the tunable table is the daemon's (ctld/units.o: no libevent)
CLI_LIB_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(CLI_LIB_SRCS)) $(BUILD)/obj/ctld/units.o
CLI_OBJS := $(CLI_LIB_OBJS) $(BUILD)/obj/cli/allocctl.o
CLI_CFLAGS := $(PROTOBUF_CFLAGS) $(JANSSON_CFLAGS) -I$(ROOT)/ctld -DALLOCCTL_VERSION='"$(ALLOCCTL_VERSION)"'

$(filter-out $(BUILD)/obj/ctld/%,$(CLI_OBJS)): EXTRA_CFLAGS := $(CLI_CFLAGS)
$(CLI_OBJS): $(PROTO_GEN_H)

$(BUILD)/allocctl: $(CLI_OBJS) $(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(PROTOBUF_LIBS) $(JANSSON_LIBS)

ALL_TARGETS += $(BUILD)/allocctl
INSTALL_BIN += $(BUILD)/allocctl
INSTALL_MAN1 += $(ROOT)/cli/allocctl.1

# Criterion unit tests of the CLI's parsers and renderers.
CLI_TEST_SRCS := $(sort $(wildcard $(ROOT)/tests/cli/*.c))
CLI_TEST_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(CLI_TEST_SRCS))
CLI_TEST_BINS := $(patsubst $(ROOT)/tests/cli/%.c,$(BUILD)/tests/criterion/cli_%,$(CLI_TEST_SRCS))
$(CLI_TEST_OBJS): EXTRA_CFLAGS := $(CLI_CFLAGS) $(CRITERION_CFLAGS) -I$(ROOT)/cli \
	-Wno-missing-prototypes
$(CLI_TEST_OBJS): $(PROTO_GEN_H)
$(CLI_TEST_BINS): $(BUILD)/tests/criterion/cli_%: $(BUILD)/obj/tests/cli/%.o $(CLI_LIB_OBJS) \
		$(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(PROTOBUF_LIBS) $(JANSSON_LIBS) $(CRITERION_LIBS)

# The stand-in daemon the CLI suites use for replies a real process cannot be made to give
# on demand (permission denied, timeouts, version mismatch, many processes).
CLI_FAKE_OBJ := $(BUILD)/obj/tests/cli/fake/fake_ctld.o
$(CLI_FAKE_OBJ): EXTRA_CFLAGS := $(PROTOBUF_CFLAGS) -I$(ROOT)/cli -I$(ROOT)/ctld
$(CLI_FAKE_OBJ): $(PROTO_GEN_H)
$(BUILD)/tests/cli/fake-ctld: $(CLI_FAKE_OBJ) $(BUILD)/obj/cli/tunable.o $(BUILD)/obj/cli/fmt.o $(BUILD)/obj/ctld/units.o \
		$(BUILD)/libctlproto.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(PROTOBUF_LIBS)

TEST_BINS += $(CLI_TEST_BINS)
TEST_DEPS += $(BUILD)/allocctl $(BUILD)/tests/cli/fake-ctld $(BUILD)/tests/workload

# `make demo` runs the workload service (tests/helpers/workload.c).
demo: $(BUILD)/tests/workload
