/* log.c — leveled stderr logging with a UTC timestamp; one write(2) per line so lines
 * from the daemon never interleave mid-line with anything else writing to stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int log_level = LOGL_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void log_msg(int level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	char line[1024];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
	                 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ allocctld[%d]: %s: ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
