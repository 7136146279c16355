/* SPDX-License-Identifier: MIT */
/*
 * config.c - reads the NOSIGBUS_* variables, once, in the constructor.
 *
 * Values are untrusted (the library may be loaded into any program): they
 * are only ever compared against fixed words, and an invalid one costs one
 * warning line and the default.  Nothing here runs in signal context; the
 * handler only reads nsb_config.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nsb.h"

struct nsb_config nsb_config = {
	.policy = NSB_POLICY_FLAG,
	.fill = NSB_FILL_PAGE,
	.page_size = 0,
};

struct word {
	const char *name;
	int value;
};

static const struct word policy_words[] = {
	{ "flag", NSB_POLICY_FLAG }, { "shm", NSB_POLICY_SHM },
	{ "files", NSB_POLICY_FILES }, { NULL, 0 },
};
static const struct word fill_words[] = {
	{ "page", NSB_FILL_PAGE }, { "range", NSB_FILL_RANGE }, { "auto", NSB_FILL_AUTO },
	{ NULL, 0 },
};
static const struct word errors_words[] = {
	{ "pass", NSB_ERRORS_PASS }, { "zero", NSB_ERRORS_ZERO }, { NULL, 0 },
};
static const struct word bool_words[] = {
	{ "1", 1 }, { "yes", 1 }, { "true", 1 }, { "on", 1 },
	{ "0", 0 }, { "no", 0 }, { "false", 0 }, { "off", 0 }, { NULL, 0 },
};

struct variable {
	const char *name;
	const struct word *words;
	const char *expected;
	const char *fallback;
};

static const struct variable variables[] = {
	{ "NOSIGBUS_POLICY", policy_words, "flag, shm or files", "flag" },
	{ "NOSIGBUS_FILL", fill_words, "page, range or auto", "page" },
	{ "NOSIGBUS_ERRORS", errors_words, "pass or zero", "pass" },
	{ "NOSIGBUS_STRICT", bool_words, "0 or 1", "0" },
	{ "NOSIGBUS_LOG", bool_words, "0 or 1", "0" },
};

static const struct variable *
find_variable(const char *name)
{
	for (size_t i = 0; i < sizeof(variables) / sizeof(variables[0]); i++)
		if (strcmp(variables[i].name, name) == 0)
			return &variables[i];
	return NULL;
}

bool
nsb_config_parse(const char *name, const char *value, int *out)
{
	const struct variable *v = find_variable(name);

	if (!v || !value)
		return false;
	for (const struct word *w = v->words; w->name; w++) {
		if (strcasecmp(w->name, value) == 0) {
			*out = w->value;
			return true;
		}
	}
	return false;
}

/* Unset or empty means the default; anything else must parse. */
static int
read_variable(const char *name, int fallback)
{
	const struct variable *v = find_variable(name);
	const char *value = getenv(name);
	char shown[65];
	size_t i;
	int out;

	if (!value || !*value)
		return fallback;
	if (nsb_config_parse(name, value, &out))
		return out;
	/* A hostile value must neither flood stderr nor forge a line. */
	for (i = 0; value[i] && i < sizeof(shown) - 1; i++)
		shown[i] = (unsigned char)value[i] < 0x20 || value[i] == 0x7f ? '?' : value[i];
	shown[i] = '\0';
	nsb_warn("ignoring %s=%s%s (expected %s); using %s", name, shown,
		 value[i] ? "..." : "", v->expected, v->fallback);
	return fallback;
}

/*
 * The page size is needed by every shim, even one called before our
 * constructor (another preload's initialisation may map memory: ASan's
 * does, from .preinit_array).  The variables are read by the constructor,
 * when the environment surely exists; until then the defaults apply.
 */
void
nsb_config_init(void)
{
	if (!nsb_config.page_size)
		nsb_config.page_size = (size_t)sysconf(_SC_PAGESIZE);
}

void
nsb_config_read(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	nsb_config_init();
	nsb_config.policy = (enum nsb_policy)read_variable("NOSIGBUS_POLICY", NSB_POLICY_FLAG);
	nsb_config.fill = (enum nsb_fill)read_variable("NOSIGBUS_FILL", NSB_FILL_PAGE);
	nsb_config.errors = (enum nsb_errors)read_variable("NOSIGBUS_ERRORS", NSB_ERRORS_PASS);
	nsb_config.strict = read_variable("NOSIGBUS_STRICT", 0);
	nsb_config.log = read_variable("NOSIGBUS_LOG", 0);
}
