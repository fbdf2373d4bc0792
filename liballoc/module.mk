# liballoc/: the allocator. Built -fvisibility=hidden with explicit exports (LA_EXPORT),
# initial-exec TLS, and without malloc builtins so the compiler never turns our own code
# into calls to the allocator it implements.
#
# Sanitizer builds (SAN=asan|tsan) compile the allocator with LA_PREFIX=la_: its entry
# points become la_malloc, la_free, ... so the sanitizer keeps its own malloc while the
# allocator's code is checked; tests reach it through tests/api/api.h.
LIBALLOC_SRCS := $(sort $(wildcard $(ROOT)/liballoc/src/*.c))
LIBALLOC_OBJS := $(patsubst $(ROOT)/%.c,$(BUILD)/obj/%.o,$(LIBALLOC_SRCS))
LIBALLOC_CFLAGS := -fPIC -fvisibility=hidden -ftls-model=initial-exec -fno-builtin-malloc \
	-fno-builtin-calloc -fno-builtin-free -fno-builtin-realloc -fno-tree-loop-distribute-patterns \
	-fdata-sections -ffunction-sections -D_LGPL_SOURCE $(URCU_CFLAGS) -I$(ROOT)/liballoc/src
ifneq ($(SAN),)
LIBALLOC_CFLAGS += -DLA_PREFIX=la_
endif
# LA_NO_STATS=1 compiles statistics and the control thread out (for the overhead bench).
ifeq ($(LA_NO_STATS),1)
LIBALLOC_CFLAGS += -DLA_NO_STATS=1
endif
$(LIBALLOC_OBJS): EXTRA_CFLAGS := $(LIBALLOC_CFLAGS)
# The objects' flags are set in this file (here and below: -Os for the cold ones, the packed
# ones): a change of it builds them again, or an incremental build keeps objects made with
# the old flags (a text size startup.bats then reads wrong)
$(LIBALLOC_OBJS): $(ROOT)/liballoc/module.mk

# Text layout (liballoc/text-order.ld, from scripts/text-order.py; each function in its own
# section, -ffunction-sections): the functions every process runs at start come first, next
# to .init and the PLT, then those allocation workloads run, the rare ones last, so that a
# small process faults in one fault-around window of the text (16 of its 41 pages) rather
# than all of it. -fini names no symbol: no DT_FINI, whose call at exit ran the empty _fini
# (crti/crtn) on the text's last page, a fault and a window of rare code in every process;
# the destructors run from .fini_array as before. (GNU ld emits no DT_FINI for a -fini symbol
# that is not defined; another linker may refuse it: tests/e2e/startup.bats checks the result.)
#
# --gc-sections drops the functions nothing in liballoc.so calls (helpers only the unit
# tests call, which link liballoc.a: 1.8 KiB of .text at 7bb8f00); what is exported, the
# constructors and destructors stay. .text must end below the page .rodata starts on, with
# room to spare: tests/e2e/startup.bats checks it (a .rodata a page further costs the small
# rows a fault-around window, bench/README.md, aligned34 and fork35).
$(BUILD)/liballoc.so: $(LIBALLOC_OBJS) $(ROOT)/liballoc/owner.ld $(ROOT)/liballoc/text-order.ld
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -o $@ $(filter %.o,$^) $(LDFLAGS) -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -Wl,--sort-section=alignment -Wl,--gc-sections -Wl,-T,$(ROOT)/liballoc/owner.ld -Wl,-T,$(ROOT)/liballoc/text-order.ld -Wl,-fini=la_no_fini -lpthread

# The size-class tables: sizeclass.c built as a program (SC_GEN) prints them as constants,
# the tables' initializers (.rodata), instead of computing them in every process.
$(BUILD)/gen/sc_gen: $(ROOT)/liballoc/src/sizeclass.c $(ROOT)/liballoc/src/sizeclass.h \
		$(ROOT)/liballoc/src/common.h
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CSTD) $(WARN) -O1 -DSC_GEN -I$(ROOT)/liballoc/src $(URCU_CFLAGS) \
		-o $@ $<
$(BUILD)/gen/sc_tables.h: $(BUILD)/gen/sc_gen
	$(Q)$< > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/liballoc/src/sizeclass.o: $(BUILD)/gen/sc_tables.h

$(BUILD)/liballoc.a: $(LIBALLOC_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/liballoc.so $(BUILD)/liballoc.a
# Code off the allocation paths (the control thread, the segment, tunables, fatal
# reports, system-call wrappers) is optimised for size: every page of liballoc.so is
# resident in every preloaded process (the kernel maps a file's cached pages around each
# fault), so smaller cold code is less RSS everywhere.
LIBALLOC_COLD_OBJS := $(patsubst %,$(BUILD)/obj/liballoc/src/%.o,control pressure shm tunables fatal os sigbus)
$(LIBALLOC_COLD_OBJS): EXTRA_CFLAGS := $(LIBALLOC_CFLAGS) -Os

# sysraw.c's, ownstr.c's and ownsig.c's functions are a system call or a few loads each:
# packed (no 16-byte alignment of each), they take ~0.3 KiB less of the text's room below
# .rodata's page (tests/e2e/startup.bats)
$(BUILD)/obj/liballoc/src/sysraw.o $(BUILD)/obj/liballoc/src/ownstr.o $(BUILD)/obj/liballoc/src/ownsig.o: EXTRA_CFLAGS += -Os -falign-functions=1 -mgeneral-regs-only
