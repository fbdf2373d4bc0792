/* log.h — leveled logging to stderr for allocctld ("allocctld[pid]: LEVEL message").
 * One global level, changed by the config (SIGHUP); messages above it cost one compare.
 * Single-threaded use (the daemon has one event loop). */
#ifndef CTLD_LOG_H
#define CTLD_LOG_H

enum log_level { LOGL_ERROR = 0, LOGL_WARN = 1, LOGL_INFO = 2, LOGL_DEBUG = 3 };

extern int log_level;

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "error", "warn", "info", "debug" -> level, or -1. */
int log_level_parse(const char *name);

#define log_error(...) log_msg(LOGL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOGL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOGL_INFO, __VA_ARGS__)
#define log_debug(...)                                    \
	do {                                              \
		if (log_level >= LOGL_DEBUG)              \
			log_msg(LOGL_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
