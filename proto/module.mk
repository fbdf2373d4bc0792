# proto/: protobuf-c code generated into $(BUILD)/gen (never committed) + the framing helpers.
PROTO_SRCS := $(wildcard $(ROOT)/proto/*.proto)
PROTO_GEN_C := $(patsubst $(ROOT)/proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTO_SRCS))
PROTO_GEN_H := $(PROTO_GEN_C:.c=.h)
PROTO_OBJS := $(PROTO_GEN_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o) $(BUILD)/obj/proto/wire.o

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: $(ROOT)/proto/%.proto
	$(call msg,PROTOC,$<)
	$(Q)mkdir -p $(BUILD)/gen
	$(Q)protoc-c --c_out=$(BUILD)/gen -I$(ROOT)/proto $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	$(call msg,CC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(PROTOBUF_CFLAGS) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(BUILD)/obj/proto/wire.o: $(PROTO_GEN_H)
$(BUILD)/libctlproto.a: $(PROTO_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^
