# tests/reliability/: helper programs of the reliability suites (faults.bats, soak.bats,
# permissions.bats), built to $(BUILD)/tests/reliability/<name>. They use the process's
# malloc and are run under LD_PRELOAD=$(BUILD)/liballoc.so by the suites (which are marked
# "# san: skip"), so they are built in plain builds only.
REL_SRCS := $(sort $(wildcard $(ROOT)/tests/reliability/*.c))
REL_BINS := $(patsubst $(ROOT)/tests/reliability/%.c,$(BUILD)/tests/reliability/%,$(REL_SRCS))
$(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(REL_SRCS)): EXTRA_CFLAGS := -fno-builtin-malloc \
	-fno-builtin-calloc -fno-builtin-free -fno-builtin-realloc -Wno-missing-prototypes
$(BUILD)/tests/reliability/%: $(BUILD)/obj/tests/reliability/%.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< $(LDFLAGS) -lpthread
# (a prerequisite rule of its own too: `test`'s prerequisite list is expanded where
# tests/module.mk defines it, which may come before this fragment)
ifeq ($(SAN),)
REL_DEPS := $(REL_BINS) $(BUILD)/allocctl $(BUILD)/allocctld $(BUILD)/tests/fakeseg \
	$(BUILD)/tests/ctlclient
TEST_DEPS += $(REL_DEPS)
test: $(REL_DEPS)
endif
