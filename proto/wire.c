/* wire.c — length-prefixed framing of ctl.proto messages for blocking clients.
 * Every read and write is bounded by a poll() timeout; nothing is allocated before a
 * frame length has been checked against CTL_MAX_FRAME. */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int wire_frame_length(const uint8_t hdr[4], uint32_t *len)
{
	uint32_t n =
	        (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	if (n == 0 || n > CTL_MAX_FRAME)
		return -1;
	*len = n;
	return 0;
}

void wire_frame_header(uint8_t hdr[4], uint32_t len)
{
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events, at most until deadline (ms, CLOCK_MONOTONIC). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static int io_full(int fd, void *buf, size_t len, int writing, int64_t deadline)
{
	uint8_t *p = buf;
	while (len > 0) {
		if (wait_fd(fd, writing ? POLLOUT : POLLIN, deadline) < 0)
			return -1;
		ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send(int fd, const ProtobufCMessage *msg, int timeout_ms)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	if (len == 0 || len > CTL_MAX_FRAME) {
		errno = EMSGSIZE;
		return -1;
	}
	uint8_t *buf = malloc(len + 4);
	if (!buf)
		return -1;
	wire_frame_header(buf, (uint32_t)len);
	protobuf_c_message_pack(msg, buf + 4);
	int r = io_full(fd, buf, len + 4, 1, now_ms() + timeout_ms);
	int saved = errno;
	free(buf);
	errno = saved;
	return r;
}

int wire_recv(int fd, uint8_t **out, uint32_t *outlen, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t hdr[4];
	uint32_t len;
	if (io_full(fd, hdr, 4, 0, deadline) < 0)
		return -1;
	if (wire_frame_length(hdr, &len) < 0) {
		errno = EMSGSIZE;
		return -1;
	}
	uint8_t *buf = malloc(len);
	if (!buf)
		return -1;
	if (io_full(fd, buf, len, 0, deadline) < 0) {
		int saved = errno;
		free(buf);
		errno = saved;
		return -1;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

const char *wire_socket_path(const char *path)
{
	if (path && *path)
		return path;
	const char *env = getenv(CTL_SOCKET_ENV);
	return env && *env ? env : CTL_DEFAULT_SOCKET;
}

int wire_connect(const char *path)
{
	path = wire_socket_path(path);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

Ctl__Reply *wire_call(int fd, Ctl__Envelope *env, int timeout_ms)
{
	env->protocol_version = CTL_PROTOCOL_VERSION;
	uint8_t *buf;
	uint32_t len;
	if (wire_send(fd, &env->base, timeout_ms) < 0) {
		/* a daemon that refused the connection (ERR_BUSY) said why before closing: the
		 * reply is still there to read although our request could not be sent */
		int e = errno;
		if ((e != EPIPE && e != ECONNRESET) ||
		    wire_recv(fd, &buf, &len, timeout_ms < 1000 ? timeout_ms : 1000) < 0) {
			errno = e;
			return NULL;
		}
	} else {
		return wire_reply(fd, timeout_ms);
	}
	Ctl__Reply *r = ctl__reply__unpack(NULL, len, buf);
	free(buf);
	if (!r)
		errno = EBADMSG;
	return r;
}

Ctl__Reply *wire_reply(int fd, int timeout_ms)
{
	uint8_t *buf;
	uint32_t len;
	if (wire_recv(fd, &buf, &len, timeout_ms) < 0)
		return NULL;
	Ctl__Reply *r = ctl__reply__unpack(NULL, len, buf);
	free(buf);
	if (!r)
		errno = EBADMSG;
	return r;
}
