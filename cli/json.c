/* json.c — allocctl's --json documents through jansson (json.h). */
#include <jansson.h>

#include "jsontext.h" /* before json.h: it calls jansson's own json_string */

#include "json.h"

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->root = NULL;
}

/* Add v (a new reference) under key in the innermost open container, or as the document. */
static void put(struct json *j, const char *key, json_t *v)
{
	if (!v)
		v = json_null();
	if (j->depth == 0) {
		if (!j->root)
			j->root = v;
		else
			json_decref(v);
		return;
	}
	json_t *top = j->stack[j->depth - 1];
	if (json_is_object(top))
		json_object_set_new(top, key ? key : "", v);
	else
		json_array_append_new(top, v);
}

static void begin(struct json *j, const char *key, json_t *c)
{
	put(j, key, c);
	if (c && j->depth < JSON_DEPTH)
		j->stack[j->depth++] = c; /* the parent (or root) holds the reference */
}

void json_object_begin(struct json *j, const char *key)
{
	begin(j, key, json_object());
}

void json_document_begin(struct json *j, FILE *f)
{
	json_init(j, f);
	json_object_begin(j, NULL);
	json_u64(j, "schema_version", ALLOCCTL_JSON_SCHEMA_VERSION);
}

void json_object_end(struct json *j)
{
	if (j->depth > 0)
		j->depth--;
}

void json_array_begin(struct json *j, const char *key)
{
	begin(j, key, json_array());
}

void json_array_end(struct json *j)
{
	if (j->depth > 0)
		j->depth--;
}

void json_string(struct json *j, const char *key, const char *value)
{
	put(j, key, value ? json_text(value) : json_null());
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
	put(j, key, json_integer(value > INT64_MAX ? INT64_MAX : (json_int_t)value));
}

void json_i64(struct json *j, const char *key, int64_t value)
{
	put(j, key, json_integer(value));
}

void json_bool(struct json *j, const char *key, bool value)
{
	put(j, key, json_boolean(value));
}

void json_finish(struct json *j)
{
	if (j->root)
		json_dumpf(j->root, j->f, JSON_COMPACT);
	fputc('\n', j->f);
	json_decref(j->root);
	j->root = NULL;
	j->depth = 0;
}
