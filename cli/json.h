/* json.h — a minimal streaming JSON writer for allocctl --json (compact, one document per
 * line). The caller nests begin/end calls correctly; keys are given inside objects and are
 * NULL inside arrays. Strings are escaped per RFC 8259. Depth is bounded by JSON_DEPTH. */
#ifndef ALLOCCTL_JSON_H
#define ALLOCCTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH 16

struct json {
	FILE *f;
	int depth;
	bool has_items[JSON_DEPTH]; /* has_items[d]: a value was written at depth d */
};

void json_init(struct json *j, FILE *f);
void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
void json_string(struct json *j, const char *key, const char *value); /* NULL -> null */
void json_u64(struct json *j, const char *key, uint64_t value);
void json_i64(struct json *j, const char *key, int64_t value);
void json_bool(struct json *j, const char *key, bool value);
/* Ends the document with a newline (call after the outermost end). */
void json_finish(struct json *j);

#endif
