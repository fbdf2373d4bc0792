/* wire.h — framing of the control protocol (proto/ctl.proto) on a Unix stream socket.
 * A frame is a 4-byte big-endian length, then that many bytes of one serialized message.
 * Lengths of 0 or above CTL_MAX_FRAME are refused before anything is allocated. */
#ifndef CTL_WIRE_H
#define CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ctl.pb-c.h"

/* Bump on any incompatible change to ctl.proto (don't forget). */
#define CTL_PROTOCOL_VERSION 2u
#define CTL_MAX_FRAME        (1u << 20) /* requests and replies; a stats reply is ~40 KiB */
#define CTL_DEFAULT_SOCKET   "/run/allocctld/ctl.sock"
#define CTL_SOCKET_ENV       "ALLOCCTL_SOCKET"

/* Decode a frame header. Returns 0 and the payload length, or -1 if it is 0 or too big. */
int wire_frame_length(const uint8_t hdr[4], uint32_t *len);
/* Encode a frame header for a payload of len bytes. */
void wire_frame_header(uint8_t hdr[4], uint32_t len);

/* Blocking helpers for clients and tests (the daemon frames on its bufferevents).
 * Return 0 on success, -1 with errno set (EMSGSIZE for a bad length, ETIMEDOUT after
 * timeout_ms without progress, EPIPE/ECONNRESET when the peer went away). */
int wire_send(int fd, const ProtobufCMessage *msg, int timeout_ms);
/* Receives one frame into a malloc'd buffer (*buf, *len); the caller frees *buf. */
int wire_recv(int fd, uint8_t **buf, uint32_t *len, int timeout_ms);

/* Connect to the daemon socket at path (NULL: $ALLOCCTL_SOCKET or the default).
 * Returns the fd or -1 with errno set. */
int wire_connect(const char *path);
const char *wire_socket_path(const char *path);

/* One round trip: send env (protocol_version filled in), receive and unpack the Reply.
 * Returns NULL with errno set on failure; free with ctl__reply__free_unpacked(r, NULL). */
Ctl__Reply *wire_call(int fd, Ctl__Envelope *env, int timeout_ms);
/* Receive and unpack the next Reply without sending (the pages of a streamed list). */
Ctl__Reply *wire_reply(int fd, int timeout_ms);

#endif
