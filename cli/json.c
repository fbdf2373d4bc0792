/* json.c — streaming JSON writer (json.h). */
#include "json.h"

#include <inttypes.h>

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->has_items[0] = false;
}

static void put_escaped(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* Separator and key before a value at the current depth. */
static void prefix(struct json *j, const char *key)
{
	if (j->has_items[j->depth])
		fputc(',', j->f);
	j->has_items[j->depth] = true;
	if (key) {
		put_escaped(j->f, key);
		fputc(':', j->f);
	}
}

static void begin_container(struct json *j, const char *key, char c)
{
	prefix(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_DEPTH)
		j->depth++;
	j->has_items[j->depth] = false;
}

static void end_container(struct json *j, char c)
{
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
}

void json_object_begin(struct json *j, const char *key)
{
	begin_container(j, key, '{');
}

void json_object_end(struct json *j)
{
	end_container(j, '}');
}

void json_array_begin(struct json *j, const char *key)
{
	begin_container(j, key, '[');
}

void json_array_end(struct json *j)
{
	end_container(j, ']');
}

void json_string(struct json *j, const char *key, const char *value)
{
	prefix(j, key);
	if (value)
		put_escaped(j->f, value);
	else
		fputs("null", j->f);
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
	prefix(j, key);
	fprintf(j->f, "%" PRIu64, value);
}

void json_i64(struct json *j, const char *key, int64_t value)
{
	prefix(j, key);
	fprintf(j->f, "%" PRId64, value);
}

void json_bool(struct json *j, const char *key, bool value)
{
	prefix(j, key);
	fputs(value ? "true" : "false", j->f);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
}
