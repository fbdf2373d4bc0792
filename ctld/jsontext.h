/* jsontext.h — a JSON string (jansson) from text that need not be UTF-8: process names,
 * command lines, reasons and query parameters come from other users. jansson refuses
 * invalid UTF-8 (json_string returns NULL, json_pack fails, and the value, or the whole
 * object, would be lost); here every byte of an invalid string at or above 0x80 becomes
 * U+FFFD instead, so the value is always there and always valid JSON. */
#ifndef CTLD_JSONTEXT_H
#define CTLD_JSONTEXT_H

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static inline json_t *json_text(const char *s)
{
	if (!s)
		s = "";
	json_t *v = json_string(s);
	if (v)
		return v;
	size_t n = strlen(s), o = 0;
	char *t = malloc(3 * n + 1);
	if (!t)
		return json_string("");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			t[o++] = (char)c;
		} else {
			memcpy(t + o, "\xEF\xBF\xBD", 3);
			o += 3;
		}
	}
	t[o] = 0;
	v = json_string(t);
	free(t);
	return v ? v : json_string("");
}

#endif
