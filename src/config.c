/* SPDX-License-Identifier: MIT */
/*
 * config.c - reads the NOSIGBUS_* variables, once, in the constructor.
 *
 * Values are untrusted (the library may be loaded into any program): they
 * are only ever compared against fixed words, ignoring case (the wrapper
 * follows the same rule), and an invalid one costs one warning line and
 * the default.  Reading costs one pass over the environment, whatever the
 * number of variables: this runs in the constructor of every process the
 * library is loaded into.  Nothing here runs in signal context; the
 * handler only reads nsb_config.
 *
 * In a process with AT_SECURE (set-user-ID, set-group-ID, file
 * capabilities), where the library can only have come from a system-wide
 * preload, the environment is someone else's: no NOSIGBUS_* variable is
 * read (the defaults apply, the hand-off too is left alone) and the
 * library prints nothing (log.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "nsb.h"

struct nsb_config nsb_config = {
	.policy = NSB_DEFAULT_POLICY,
	.fill = NSB_DEFAULT_FILL,
	.errors = NSB_DEFAULT_ERRORS,
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
	{ "pass", NSB_ERRORS_PASS }, { "peer", NSB_ERRORS_PEER }, { "zero", NSB_ERRORS_ZERO },
	{ NULL, 0 },
};
static const struct word bool_words[] = {
	{ "1", 1 }, { "yes", 1 }, { "true", 1 }, { "on", 1 },
	{ "0", 0 }, { "no", 0 }, { "false", 0 }, { "off", 0 }, { NULL, 0 },
};
/* 1: a line per mapping (the first rescue, then at most one a second with
 * the count, and one when it is unmapped); pages: a line per rescue. */
static const struct word log_words[] = {
	{ "1", NSB_LOG_MAPPINGS }, { "yes", NSB_LOG_MAPPINGS }, { "true", NSB_LOG_MAPPINGS },
	{ "on", NSB_LOG_MAPPINGS }, { "pages", NSB_LOG_PAGES },
	{ "0", NSB_LOG_OFF }, { "no", NSB_LOG_OFF }, { "false", NSB_LOG_OFF },
	{ "off", NSB_LOG_OFF }, { NULL, 0 },
};

struct variable {
	const char *name;	/* without the NOSIGBUS_ prefix */
	const struct word *words;
	const char *expected;	/* for the warning */
	const char *fallback;	/* the default's word, for the warning */
	int default_value;
};

/* The order is that of enum var below. */
static const struct variable variables[] = {
	{ "POLICY", policy_words, "flag, shm or files", "shm", NSB_DEFAULT_POLICY },
	{ "FILL", fill_words, "page, range or auto", "the default", NSB_DEFAULT_FILL },
	{ "ERRORS", errors_words, "pass, peer or zero", "peer", NSB_DEFAULT_ERRORS },
	{ "STRICT", bool_words, "0 or 1", "0", 0 },
	{ "LOG", log_words, "0, 1 or pages", "0", NSB_LOG_OFF },
};
enum var { VAR_POLICY, VAR_FILL, VAR_ERRORS, VAR_STRICT, VAR_LOG, VAR_COUNT };

/* The hand-off of dispositions.c: honoured only with the value exec.c
 * writes, the pid of the writer, which is this process's own after an
 * exec and its parent's after a spawn. */
static bool
handoff_is_ours(const char *value)
{
	unsigned long v = 0;

	if (!*value || *value == '0')
		return false;
	for (const char *c = value; *c; c++) {
		if (*c < '0' || *c > '9' || v > 1000000000ul)
			return false;
		v = v * 10 + (unsigned long)(*c - '0');
	}
	return v == (unsigned long)getpid() || v == (unsigned long)getppid();
}

#define PREFIX "NOSIGBUS_"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

/* name is the full name when len is SIZE_MAX, else its first len bytes. */
static const struct variable *
find_variable(const char *name, size_t len)
{
	if (len == SIZE_MAX)
		len = strlen(name);
	if (len <= PREFIX_LEN || memcmp(name, PREFIX, PREFIX_LEN) != 0)
		return NULL;
	name += PREFIX_LEN;
	len -= PREFIX_LEN;
	for (size_t i = 0; i < VAR_COUNT; i++)
		if (strlen(variables[i].name) == len && memcmp(variables[i].name, name, len) == 0)
			return &variables[i];
	return NULL;
}

static bool
parse(const struct variable *v, const char *value, int *out)
{
	for (const struct word *w = v->words; w->name; w++) {
		if (strcasecmp(w->name, value) == 0) {
			*out = w->value;
			return true;
		}
	}
	return false;
}

bool
nsb_config_parse(const char *name, const char *value, int *out)
{
	const struct variable *v = name ? find_variable(name, SIZE_MAX) : NULL;

	if (!v || !value)
		return false;
	return parse(v, value, out);
}

/* Unset or empty means the default; anything else must parse. */
static int
read_value(const struct variable *v, const char *value)
{
	char shown[65];
	size_t i;
	int out;

	if (!value || !*value)
		return v->default_value;
	if (parse(v, value, &out))
		return out;
	/* A hostile value must neither flood stderr nor forge a line. */
	for (i = 0; value[i] && i < sizeof(shown) - 1; i++)
		shown[i] = (unsigned char)value[i] < 0x20 || value[i] == 0x7f ? '?' : value[i];
	shown[i] = '\0';
	nsb_warn("ignoring " PREFIX "%s=%s%s (expected %s); using %s", v->name, shown,
		 value[i] ? "..." : "", v->expected, v->fallback);
	return v->default_value;
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
	/* The aux vector is where sysconf gets it from, at less cost. */
	if (!nsb_config.page_size)
		nsb_config.page_size = (size_t)getauxval(AT_PAGESZ);
	if (!nsb_config.page_size)
		nsb_config.page_size = (size_t)sysconf(_SC_PAGESIZE);
}

void
nsb_config_read(void)
{
	static bool done;
	const char *values[VAR_COUNT] = { NULL };

	if (done)
		return;
	done = true;
	nsb_config_init();
	if (getauxval(AT_SECURE)) {
		nsb_config.secure = true;
		return;
	}
	/* One pass; the first definition of a name wins, as with getenv(). */
	for (char **e = environ; e && *e; e++) {
		const char *eq;
		const struct variable *v;

		if (strncmp(*e, PREFIX, PREFIX_LEN) != 0 || !(eq = strchr(*e, '=')))
			continue;
		if ((size_t)(eq - *e) == sizeof(NSB_HANDOFF_VAR) - 1 &&
		    memcmp(*e, NSB_HANDOFF_VAR, sizeof(NSB_HANDOFF_VAR) - 1) == 0) {
			nsb_config.handoff_seen = true;
			nsb_config.inherit_ignored = handoff_is_ours(eq + 1);
			continue;
		}
		v = find_variable(*e, (size_t)(eq - *e));
		if (v && !values[v - variables])
			values[v - variables] = eq + 1;
	}
	nsb_config.policy = (enum nsb_policy)read_value(&variables[VAR_POLICY], values[VAR_POLICY]);
	nsb_config.fill = (enum nsb_fill)read_value(&variables[VAR_FILL], values[VAR_FILL]);
	nsb_config.fill_set = values[VAR_FILL] && parse(&variables[VAR_FILL], values[VAR_FILL], &(int){ 0 });
	nsb_config.errors = (enum nsb_errors)read_value(&variables[VAR_ERRORS], values[VAR_ERRORS]);
	nsb_config.strict = read_value(&variables[VAR_STRICT], values[VAR_STRICT]);
	nsb_config.log = read_value(&variables[VAR_LOG], values[VAR_LOG]);
	/* The tests' way to run the sandboxed paths without a filter. */
	{
		const char *t = getenv("NSB_TEST_SECCOMP");

		nsb_config.test_filtered = t && strcmp(t, "filtered") == 0;
		/* And the decision of a kernel without unique mount IDs
		 * (before 6.8: statx's STATX_MNT_ID only). */
		t = getenv("NSB_TEST_MNT_ID");
		nsb_config.test_plain_mnt_id = t && strcmp(t, "plain") == 0;
	}
}
