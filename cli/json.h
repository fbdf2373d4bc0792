/* json.h — the --json documents of allocctl (compact, one document per line), built with
 * jansson and written at json_finish. The caller nests begin/end calls correctly; keys are
 * given inside objects and are NULL inside arrays. Strings that are not UTF-8 (names from
 * other users' processes) are kept with U+FFFD for the bad bytes. Depth is bounded by
 * JSON_DEPTH; integers above INT64_MAX (jansson's range) are written as INT64_MAX.
 *
 * The names below predate jansson, one of whose functions is also called json_string: they
 * are compiled as cli_json_* so that neither can stand in for the other at link time. */
#ifndef ALLOCCTL_JSON_H
#define ALLOCCTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH 16

#define json_init           cli_json_init
#define json_object_begin   cli_json_object_begin
#define json_object_end     cli_json_object_end
#define json_array_begin    cli_json_array_begin
#define json_array_end      cli_json_array_end
#define json_string         cli_json_string
#define json_u64            cli_json_u64
#define json_i64            cli_json_i64
#define json_bool           cli_json_bool
#define json_finish         cli_json_finish
#define json_document_begin cli_json_document_begin

#include "render.h" /* ALLOCCTL_JSON_SCHEMA_VERSION */

struct json_t;

struct json {
	FILE *f;
	int depth;
	struct json_t *stack[JSON_DEPTH]; /* open containers, innermost last (borrowed) */
	struct json_t *root;              /* the document being built */
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
/* json_init, then the document's object with "schema_version" as its first key. */
void json_document_begin(struct json *j, FILE *f);
/* Writes the document and a newline (call after the outermost end). */
void json_finish(struct json *j);

#endif
