/* SPDX-License-Identifier: MIT */
/*
 * nosigbus - run a command with libnosigbus preloaded.  See nosigbus(1).
 *
 * Options only set NOSIGBUS_* variables; the library reads them.  Then
 * the library goes first in LD_PRELOAD (after a sanitizer runtime, which
 * must stay first), and COMMAND is exec'd.  Everything this program says
 * goes to stderr, except --help, --version and --dry-run, which are asked
 * for.
 *
 * Exit status: COMMAND's own (we exec it); 127 COMMAND not found; 126
 * COMMAND not executable; 2 usage error or library not found.
 *
 * Nothing here depends on the library directory: the installed wrapper
 * names the library by its soname and lets the dynamic loader find it.
 * The program is inspected (static, sanitizer runtime, #! line) with
 * <elf.h>, by reading its headers: no helper process.
 */

#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef NSB_VERSION
#error "NSB_VERSION, NSB_URL and NSB_PRELOAD come from meson"
#endif

extern char **environ;

/* ---- messages ------------------------------------------------------- */

static void __attribute__((format(printf, 1, 2)))
say(const char *fmt, ...)
{
	va_list ap;

	fputs("nosigbus: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The end of --help, --version and --dry-run: output that did not reach
 * its file (a full disk, a closed pipe) is an error, said on stderr. */
static int
output_done(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	say("cannot write the output: %s", strerror(errno ? errno : EIO));
	return 1;
}

/* Usage errors: one line saying what is wrong, one pointing at --help. */
static void __attribute__((noreturn))
usage_error(const char *what)
{
	say("%s", what);
	fputs("Try 'nosigbus --help' for more information.\n", stderr);
	exit(2);
}

/*
 * Memory that stays reachable until exit: the wrapper lives a few
 * microseconds, and under a sanitizer runtime inherited in LD_PRELOAD its
 * leak check would run at exit (a dry run, an error).
 */
struct kept {
	struct kept *next;
	char data[];
};

static struct kept *kept;

static char *
keep(size_t n)
{
	struct kept *k = malloc(sizeof(*k) + n);

	if (!k) {
		say("out of memory");
		exit(2);
	}
	k->next = kept;
	kept = k;
	return k->data;
}

static char * __attribute__((format(printf, 1, 2)))
str_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	s = keep((size_t)(n < 0 ? 0 : n) + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static void
usage(void)
{
	fputs("Usage: nosigbus [OPTION]... [--] COMMAND [ARG]...\n"
	      "Run COMMAND with libnosigbus preloaded: a page fault beyond the end of a\n"
	      "protected file mapping gives zero-filled memory instead of SIGBUS.\n"
	      "\n"
	      "  -p, --policy=POLICY  which mappings to protect: shm (the default: every\n"
	      "                       mapping of a memfd, tmpfs or hugetlbfs file, and those\n"
	      "                       mapped with MAP_NOSIGBUS), files (also every mapping\n"
	      "                       of a regular file) or flag (only MAP_NOSIGBUS ones)\n"
	      "  -f, --fill=FILL      what a rescue replaces: page (the faulting page),\n"
	      "                       range (from it to the end of the mapping) or auto;\n"
	      "                       unset, range for a memory-backed file the policy\n"
	      "                       protects and page for everything else\n"
	      "  -e, --errors=ERRORS  a fault inside the file's size (an I/O error): peer\n"
	      "                       (the default: zero pages in a file another process\n"
	      "                       handed over, to the program in its own files), pass\n"
	      "                       (always to the program) or zero (always zero pages)\n"
	      "      --strict         private mappings only, as the kernel patch: refuse\n"
	      "                       MAP_SHARED|MAP_NOSIGBUS with EINVAL, and leave shared\n"
	      "                       mappings out of --policy\n"
	      "  -v, --verbose        log rescues on stderr: a mapping's first, then its\n"
	      "                       count at most once a second, and a line when it is\n"
	      "                       unmapped; a summary at exit from each process that\n"
	      "                       rescued something (NOSIGBUS_LOG=pages: every rescue)\n"
	      "  -n, --dry-run        print the settings in effect, LD_PRELOAD and the\n"
	      "                       command, run nothing\n"
	      "  -h, --help           print this help and exit\n"
	      "  -V, --version        print the version and exit\n"
	      "\n"
	      "Values may be given in any case.  Exit status is COMMAND's; 126 if it\n"
	      "cannot be executed, 127 if it is not found, 2 for a usage error or a\n"
	      "missing library.  See nosigbus(1) and " NSB_URL ".\n", stdout);
}

/* ---- the variables' words ------------------------------------------- */

/*
 * The words of one variable, in any case as the library reads them: each
 * list maps a spelling to the word the library uses.
 */
struct word {
	const char *in;
	const char *out;
};

static const struct word policy_words[] = {
	{ "shm", "shm" }, { "files", "files" }, { "flag", "flag" }, { NULL, NULL } };
static const struct word fill_words[] = {
	{ "page", "page" }, { "range", "range" }, { "auto", "auto" }, { NULL, NULL } };
static const struct word errors_words[] = {
	{ "pass", "pass" }, { "peer", "peer" }, { "zero", "zero" }, { NULL, NULL } };
static const struct word bool_words[] = {
	{ "1", "1" }, { "yes", "1" }, { "true", "1" }, { "on", "1" },
	{ "0", "0" }, { "no", "0" }, { "false", "0" }, { "off", "0" }, { NULL, NULL } };
/* NOSIGBUS_LOG: a boolean, or pages (a line per rescue). */
static const struct word log_words[] = {
	{ "pages", "pages" },
	{ "1", "1" }, { "yes", "1" }, { "true", "1" }, { "on", "1" },
	{ "0", "0" }, { "no", "0" }, { "false", "0" }, { "off", "0" }, { NULL, NULL } };

/* Only ASCII letters fold, as in the shell patterns [Ss][Hh][Mm]. */
static bool
same_word(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		unsigned char x = (unsigned char)*a, y = (unsigned char)*b;

		if (x >= 'A' && x <= 'Z')
			x += 'a' - 'A';
		if (x != y)
			return false;
	}
	return *a == *b;
}

static const char *
word_of(const struct word *words, const char *value)
{
	for (; words->in; words++)
		if (same_word(value, words->in))
			return words->out;
	return NULL;
}

struct setting {
	const char *name;
	const struct word *words;
	const char *expected;
	const char *dflt;	/* shown by --dry-run when unset */
};

static const struct setting settings[] = {
	{ "NOSIGBUS_POLICY", policy_words, "flag, shm or files", "shm" },
	/* Unset, the fill depends on the mapping (range for a memory-backed
	 * file the policy protects, page for the rest): shown empty, which
	 * the library reads as its default. */
	{ "NOSIGBUS_FILL", fill_words, "page, range or auto", "" },
	{ "NOSIGBUS_ERRORS", errors_words, "pass, peer or zero", "peer" },
	{ "NOSIGBUS_STRICT", bool_words, "0 or 1", "0" },
	{ "NOSIGBUS_LOG", log_words, "0, 1 or pages", "0" },
};

static void
set_option(const char *name, const struct word *words, const char *what,
	   const char *expected, const char *value)
{
	const char *w = word_of(words, value);

	if (!w)
		usage_error(str_printf("invalid %s '%s' (expected %s)", what, value, expected));
	setenv(name, w, 1);
}

/* ---- quoting, for --dry-run and messages ---------------------------- */

/* $1 quoted for the shell when it needs it, so that output can be pasted back. */
static char *
quote(const char *s)
{
	static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				    "0123456789_./:=@%+,-";
	size_t n = 2;
	char *q, *p;

	if (*s && strspn(s, plain) == strlen(s))
		return str_printf("%s", s);
	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	p = q = keep(n + 1);
	*p++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *c;
		}
	}
	*p++ = '\'';
	*p = '\0';
	return q;
}

/*
 * A value the library would ignore (with one warning per process of the
 * tree) is a usage error here, as it is given to an option.  Empty means
 * the default, for the library too.  A hostile value must neither flood
 * stderr nor forge a line: at most 64 bytes, control characters as '?'
 * (as the library shows it).
 */
static void
check_setting(const struct setting *s)
{
	const char *value = getenv(s->name);
	char shown[64 + 4];
	size_t i;

	if (!value || !*value || word_of(s->words, value))
		return;
	for (i = 0; value[i] && i < 64; i++) {
		unsigned char c = (unsigned char)value[i];

		shown[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	shown[i] = '\0';
	if (value[i])
		strcat(shown, "...");
	usage_error(str_printf("invalid %s=%s (expected %s)", s->name, quote(shown), s->expected));
}

/* ---- files ------------------------------------------------------------ */

static bool
exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

static bool
is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool
is_file(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* test -x: with the effective IDs (root: any execute bit). */
static bool
executable(const char *p)
{
	return faccessat(AT_FDCWD, p, X_OK, AT_EACCESS) == 0;
}

/* ---- the command ------------------------------------------------------ */

static bool dry_run;
static char *cmd_path;	/* NULL: not found (a dry run goes on) */

/* A missing or unusable COMMAND: a real run fails, a dry run (which needs
 * nothing but its arguments) says what a real run would do and goes on. */
static void
command_fail(int status, const char *what)
{
	if (dry_run) {
		say("warning: %s (a real run would exit with status %d)", what, status);
		cmd_path = NULL;
		return;
	}
	say("%s", what);
	exit(status);
}

/*
 * Finds NAME the way exec does: as given when it contains a slash, else
 * the first executable regular file of that name in PATH (an empty entry
 * is the current directory).
 */
static void
find_command(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs, *dir, *denied = NULL;
	size_t len;

	if (!*name) {
		command_fail(127, "'': command not found");
		return;
	}
	if (strchr(name, '/')) {
		if (!exists(name))
			command_fail(127, str_printf("%s: No such file or directory", name));
		else if (is_dir(name))
			command_fail(126, str_printf("%s: Is a directory", name));
		else if (!executable(name))
			command_fail(126, str_printf("%s: Permission denied", name));
		else
			cmd_path = str_printf("%s", name);
		return;
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	len = strlen(path);
	dirs = str_printf("%s%s", path, len == 0 || path[len - 1] == ':' ? "." : "");
	for (char *rest = dirs; rest; ) {
		char *try;

		dir = strsep(&rest, ":");
		if (!*dir)
			dir = ".";
		len = strlen(dir);
		try = str_printf("%.*s/%s", (int)(len > 0 && dir[len - 1] == '/' ? len - 1 : len), dir, name);
		if (is_file(try) && executable(try)) {
			cmd_path = try;
			return;
		}
		if (exists(try) && !denied)
			denied = try;
	}
	if (denied)
		command_fail(126, str_printf("%s: Permission denied", denied));
	else
		command_fail(127, str_printf("%s: command not found", name));
}

/* A sanitizer runtime that must come first in the loader's list (ASan and
 * TSan refuse to start otherwise). */
static bool
is_sanitizer(const char *entry)
{
	static const char *const names[] = { "libasan.so", "libtsan.so", "libhwasan.so",
		"libclang_rt.asan", "libclang_rt.tsan", "libclang_rt.hwasan" };
	const char *base = strrchr(entry, '/') ? strrchr(entry, '/') + 1 : entry;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strncmp(base, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

/*
 * What COMMAND's file says about it.  The kernel runs a #! script's
 * interpreter; an ELF program without PT_INTERP is one the dynamic loader
 * never sees (static or static-pie); a DT_NEEDED sanitizer runtime must
 * come first in LD_PRELOAD.  Anything unreadable or odd: nothing to say.
 */
struct inspection {
	bool script;
	char interp[PATH_MAX];
	bool elf_static;
	char sanitizer[64];
};

static bool
read_at(int fd, void *buf, size_t len, off_t off)
{
	return pread(fd, buf, len, off) == (ssize_t)len;
}

/* Byte order and width of the file, for the header fields we read. */
struct elf_file {
	int fd;
	bool big;
	bool wide;
};

static unsigned long long
field(const struct elf_file *e, const unsigned char *p, size_t len)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < len; i++)
		v |= (unsigned long long)p[e->big ? len - 1 - i : i] << (8 * i);
	return v;
}

static void
inspect_elf(int fd, const unsigned char *ident, struct inspection *in)
{
	struct elf_file e = { .fd = fd };
	unsigned char eh[sizeof(Elf64_Ehdr)];
	unsigned long long phoff, phnum, phentsize, type;
	unsigned long long dynoff = 0, dynsz = 0, strtab = 0, needed[64];
	size_t nneeded = 0, w;
	struct { unsigned long long vaddr, off, filesz; } loads[64];
	size_t nloads = 0;
	bool interp = false;
	unsigned char *ph, *dyn;

	switch (ident[EI_DATA]) {
	case ELFDATA2LSB: e.big = false; break;
	case ELFDATA2MSB: e.big = true; break;
	default: return;
	}
	switch (ident[EI_CLASS]) {
	case ELFCLASS32: e.wide = false; break;
	case ELFCLASS64: e.wide = true; break;
	default: return;
	}
	w = e.wide ? 8 : 4;
	if (!read_at(fd, eh, e.wide ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr), 0))
		return;
	type = field(&e, eh + offsetof(Elf64_Ehdr, e_type), 2);
	if (type != ET_EXEC && type != ET_DYN)
		return;
	if (e.wide) {
		phoff = field(&e, eh + offsetof(Elf64_Ehdr, e_phoff), 8);
		phentsize = field(&e, eh + offsetof(Elf64_Ehdr, e_phentsize), 2);
		phnum = field(&e, eh + offsetof(Elf64_Ehdr, e_phnum), 2);
	} else {
		phoff = field(&e, eh + offsetof(Elf32_Ehdr, e_phoff), 4);
		phentsize = field(&e, eh + offsetof(Elf32_Ehdr, e_phentsize), 2);
		phnum = field(&e, eh + offsetof(Elf32_Ehdr, e_phnum), 2);
	}
	/* Real tables are a few dozen entries of the class's entry size. */
	if (phnum == 0 || phnum > 1024 ||
	    phentsize != (e.wide ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
		return;
	ph = malloc(phnum * phentsize);
	if (!ph || !read_at(fd, ph, phnum * phentsize, (off_t)phoff)) {
		free(ph);
		return;
	}
	for (size_t i = 0; i < phnum; i++) {
		const unsigned char *p = ph + i * phentsize;
		unsigned long long pt = field(&e, p, 4), off, vaddr, filesz;

		if (e.wide) {
			off = field(&e, p + offsetof(Elf64_Phdr, p_offset), 8);
			vaddr = field(&e, p + offsetof(Elf64_Phdr, p_vaddr), 8);
			filesz = field(&e, p + offsetof(Elf64_Phdr, p_filesz), 8);
		} else {
			off = field(&e, p + offsetof(Elf32_Phdr, p_offset), 4);
			vaddr = field(&e, p + offsetof(Elf32_Phdr, p_vaddr), 4);
			filesz = field(&e, p + offsetof(Elf32_Phdr, p_filesz), 4);
		}
		if (pt == PT_INTERP) {
			interp = true;
		} else if (pt == PT_DYNAMIC) {
			dynoff = off;
			dynsz = filesz;
		} else if (pt == PT_LOAD && nloads < 64) {
			loads[nloads].vaddr = vaddr;
			loads[nloads].off = off;
			loads[nloads].filesz = filesz;
			nloads++;
		}
	}
	free(ph);
	if (!interp) {
		in->elf_static = true;
		return;
	}
	if (dynsz == 0 || dynsz > 65536)
		return;
	dyn = malloc(dynsz);
	if (!dyn || !read_at(fd, dyn, dynsz, (off_t)dynoff)) {
		free(dyn);
		return;
	}
	/* The dynamic section: (tag, value) pairs up to DT_NULL. */
	for (size_t i = 0; i + 2 * w <= dynsz; i += 2 * w) {
		unsigned long long tag = field(&e, dyn + i, w), val = field(&e, dyn + i + w, w);

		if (tag == DT_NULL)
			break;
		if (tag == DT_NEEDED && nneeded < 64)
			needed[nneeded++] = val;
		else if (tag == DT_STRTAB)
			strtab = val;
	}
	free(dyn);
	if (!nneeded || !strtab)
		return;
	/* The string table's address, as a file offset: through its PT_LOAD. */
	for (size_t i = 0; i < nloads; i++) {
		if (strtab < loads[i].vaddr || strtab >= loads[i].vaddr + loads[i].filesz)
			continue;
		for (size_t k = 0; k < nneeded; k++) {
			char name[sizeof(in->sanitizer)];
			ssize_t n = pread(fd, name, sizeof(name) - 1,
					  (off_t)(strtab - loads[i].vaddr + loads[i].off + needed[k]));

			if (n <= 0)
				continue;
			name[n] = '\0';
			if (strlen(name) == (size_t)n)
				continue;	/* longer than any name we look for */
			if (is_sanitizer(name)) {
				strcpy(in->sanitizer, name);
				return;
			}
		}
		return;
	}
}

static void
inspect(const char *path, struct inspection *in)
{
	unsigned char head[PATH_MAX + 3];
	ssize_t n;
	int fd;

	memset(in, 0, sizeof(*in));
	if (!is_file(path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = pread(fd, head, sizeof(head) - 1, 0);
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		/* The interpreter: the first word after blanks (the kernel
		 * splits at a blank, and keeps the rest as one argument). */
		size_t i = 2, start, end;

		head[n] = '\0';
		in->script = true;
		while (i < (size_t)n && (head[i] == ' ' || head[i] == '\t'))
			i++;
		start = i;
		while (i < (size_t)n && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' &&
		       head[i] != '\0')
			i++;
		end = i;
		memcpy(in->interp, head + start, end - start);
		in->interp[end - start] = '\0';
	} else if (n >= EI_NIDENT && memcmp(head, ELFMAG, SELFMAG) == 0) {
		inspect_elf(fd, head, in);
	}
	close(fd);
}

/* ---- the library ------------------------------------------------------ */

static const char *library;

/* The loader's system directories, multiarch ones by pattern: one wrapper
 * serves every architecture. */
static const char *const system_dirs[] = {
	"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/*-linux-*", "/usr/lib/*-linux-*", NULL };

/* Calls fn on every directory that PATTERNS name or match, until it says yes. */
static bool
any_dir(const char *const *patterns, bool (*fn)(const char *dir, const void *arg), const void *arg)
{
	for (; *patterns; patterns++) {
		glob_t g;
		bool hit = false;

		if (!strchr(*patterns, '*')) {
			if (fn(*patterns, arg))
				return true;
			continue;
		}
		if (glob(*patterns, GLOB_ONLYDIR, NULL, &g) != 0)
			continue;
		for (size_t i = 0; i < g.gl_pathc && !hit; i++)
			hit = fn(g.gl_pathv[i], arg);
		globfree(&g);
		if (hit)
			return true;
	}
	return false;
}

static bool
has_library(const char *dir, const void *arg)
{
	char *p = str_printf("%s/%s", dir, (const char *)arg);
	bool yes = is_file(p);

	return yes;
}

/* In /usr/local, the loader finds it through its cache: one made since. */
static bool
has_cached_library(const char *dir, const void *arg)
{
	char *p = str_printf("%s/%s", dir, (const char *)arg);
	struct stat lib, cache;
	bool yes = stat(p, &lib) == 0 && S_ISREG(lib.st_mode) &&
		   stat("/etc/ld.so.cache", &cache) == 0 &&
		   (cache.st_mtim.tv_sec > lib.st_mtim.tv_sec ||
		    (cache.st_mtim.tv_sec == lib.st_mtim.tv_sec &&
		     cache.st_mtim.tv_nsec > lib.st_mtim.tv_nsec));

	return yes;
}

static bool
has_setuid_library(const char *dir, const void *arg)
{
	char *p = str_printf("%s/%s", dir, (const char *)arg);
	struct stat st;
	bool yes = stat(p, &st) == 0 && (st.st_mode & S_ISUID);

	return yes;
}

/*
 * True when the soname is in LD_LIBRARY_PATH or a directory the loader
 * searches without its cache, or in /usr/local/lib... with a cache made
 * since (ldconfig after the installation).  False means only that the
 * loader must be asked.
 */
static bool
in_loader_path(void)
{
	static const char *const local_dirs[] = {
		"/usr/local/lib", "/usr/local/lib/*-linux-*", "/usr/local/lib64", NULL };
	const char *llp = getenv("LD_LIBRARY_PATH");

	if (llp) {
		char *rest = str_printf("%s", llp), *dir;

		while ((dir = strsep(&rest, ":;")))
			if (*dir && has_library(dir, NSB_PRELOAD))
				return true;
	}
	return any_dir(system_dirs, has_library, NSB_PRELOAD) ||
	       any_dir(local_dirs, has_cached_library, NSB_PRELOAD);
}

/* The loader's own complaint when it preloads the soname into a shell,
 * without ours (NOSIGBUS_* warnings from the library) mixed in. */
static bool
loader_finds_library(void)
{
	int pipefd[2];
	char buf[1];
	pid_t pid;
	ssize_t n;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return false;
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
			unsetenv(settings[i].name);
		setenv("LD_PRELOAD", NSB_PRELOAD, 1);
		dup2(pipefd[1], 2);
		dup2(pipefd[1], 1);
		execl("/bin/sh", "sh", "-c", ":", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	n = read(pipefd[0], buf, sizeof(buf));
	close(pipefd[0]);
	waitpid(pid, NULL, 0);
	return n == 0;
}

/*
 * Finds the library: $NOSIGBUS_LIBRARY, else next to this program (the
 * build tree keeps both in build/src), else the installed one by its
 * soname.  A path is made absolute: LD_PRELOAD is read again by every exec
 * in COMMAND's process tree, whatever its working directory.
 */
static void
find_library(const char *argv0)
{
	const char *given = getenv("NOSIGBUS_LIBRARY");
	char self[PATH_MAX], *dir, *slash, *real;

	if (given && *given) {
		if (!is_file(given)) {
			say("NOSIGBUS_LIBRARY=%s: no such file", given);
			exit(2);
		}
		library = given;
	} else {
		/* Found through PATH, argv[0] has no directory: the kernel's
		 * name for the program.  Without /proc, no neighbour (never
		 * the working directory's). */
		if (strchr(argv0, '/')) {
			snprintf(self, sizeof(self), "%s", argv0);
		} else {
			ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

			self[n > 0 ? n : 0] = '\0';
		}
		slash = strrchr(self, '/');
		library = slash ? str_printf("%.*s/%s", slash == self ? 0 : (int)(slash - self), self,
					     NSB_PRELOAD)
				: NULL;
		if (!library || !is_file(library)) {
			library = NSB_PRELOAD;
			if (!in_loader_path() && !loader_finds_library()) {
				say("the dynamic loader cannot find %s (not installed? after installing under /usr/local, run ldconfig); set NOSIGBUS_LIBRARY to its path",
				    NSB_PRELOAD);
				exit(2);
			}
			return;
		}
	}
	if (library[0] == '/')
		return;
	slash = strrchr(library, '/');
	dir = slash ? str_printf("%.*s", slash == library ? 1 : (int)(slash - library), library)
		    : ".";
	real = keep(PATH_MAX);
	if (!realpath(dir, real)) {
		say("cannot resolve the directory of %s", library);
		exit(2);
	}
	library = str_printf("%s/%s", real, slash ? slash + 1 : library);
}

/* True when the loader preloads the library even into a program in secure
 * execution: named without a directory, and set-user-ID in the loader's
 * system search path (-Dsecure-preload=true; ld.so(8)). */
static bool
secure_installed(void)
{
	return !strchr(library, '/') && any_dir(system_dirs, has_setuid_library, library);
}

/*
 * LD_PRELOAD's entries, split as the shell splits on IFS=': ' (blanks
 * collapse, each colon ends a field).
 */
static size_t
split_preload(char *s, char **fields, size_t max)
{
	size_t n = 0;

	while (*s == ' ')
		s++;
	while (*s && n < max) {
		char *start = s;

		while (*s && *s != ':' && *s != ' ')
			s++;
		fields[n++] = start;
		if (*s == ' ') {
			*s++ = '\0';
			while (*s == ' ')
				s++;
			if (*s == ':')
				s++;
		} else if (*s == ':') {
			*s++ = '\0';
		}
		while (*s == ' ')
			s++;
	}
	return n;
}

/*
 * The library first, then every entry of LD_PRELOAD, unless a libnosigbus
 * is already there (nosigbus nosigbus COMMAND).  A sanitizer runtime stays
 * first: one that is first in LD_PRELOAD, or else the one COMMAND links,
 * which then goes in front.
 */
static char *
build_preload(const char *sanitizer)
{
	const char *old = getenv("LD_PRELOAD");
	char *copy, **fields, *out, *p;
	size_t n, max;

	old = old ? old : "";
	copy = str_printf("%s", old);
	/* At most one entry per separator, plus one: ":::x" has four. */
	max = strlen(old) + 1;
	fields = (char **)keep(max * sizeof(*fields));
	n = split_preload(copy, fields, max);
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(fields[i], '/') ? strrchr(fields[i], '/') + 1 : fields[i];

		if (strcmp(base, "libnosigbus.so") == 0 ||
		    (strncmp(base, "libnosigbus.so.", 15) == 0 && base[15] >= '0' && base[15] <= '9') ||
		    strcmp(fields[i], library) == 0)
			return (char *)old;
	}
	p = out = keep(strlen(old) + strlen(library) + strlen(sanitizer) + 3);
	if (n > 0 && is_sanitizer(fields[0])) {
		p = stpcpy(stpcpy(stpcpy(p, fields[0]), ":"), library);
		for (size_t i = 1; i < n; i++)
			p = stpcpy(stpcpy(p, ":"), fields[i]);
		return out;
	}
	if (*sanitizer)
		p = stpcpy(stpcpy(p, sanitizer), ":");
	p = stpcpy(p, library);
	if (n)
		stpcpy(stpcpy(p, ":"), old);
	return out;
}

/* ---- main ------------------------------------------------------------- */

/* -v: rescues logged; already a line per rescue asks for no less. */
static void
verbose(void)
{
	const char *cur = getenv("NOSIGBUS_LOG"), *w;

	w = word_of(log_words, cur && *cur ? cur : "0");
	if (!w || strcmp(w, "pages") != 0)
		setenv("NOSIGBUS_LOG", "1", 1);
}

static bool
system_program(const char *path)
{
	static const char *const dirs[] = { "/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/",
		"/usr/games/", "/usr/lib/", "/usr/libexec/" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
			return true;
	return false;
}

int
main(int argc, char **argv)
{
	struct inspection in = { 0 };
	const char *cmd, *log;
	bool asked;
	char *preload;
	int i, err;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		char opt;

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage();
			return output_done();
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("nosigbus %s\n%s\n", NSB_VERSION, NSB_URL);
			return output_done();
		}
		if (strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0 ||
		    strcmp(a, "-f") == 0 || strcmp(a, "--fill") == 0 ||
		    strcmp(a, "-e") == 0 || strcmp(a, "--errors") == 0) {
			if (i + 1 >= argc)
				usage_error(str_printf("option '%s' needs a value", a));
			opt = a[1] == '-' ? a[2] : a[1];
			v = argv[++i];
		} else if (strncmp(a, "--policy=", 9) == 0) {
			opt = 'p', v = a + 9;
		} else if (strncmp(a, "--fill=", 7) == 0) {
			opt = 'f', v = a + 7;
		} else if (strncmp(a, "--errors=", 9) == 0) {
			opt = 'e', v = a + 9;
		} else if (a[0] == '-' && a[1] && strchr("pfe", a[1]) && a[2]) {
			opt = a[1], v = a + 2;
		} else if (strcmp(a, "--strict") == 0) {
			setenv("NOSIGBUS_STRICT", "1", 1);
			continue;
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			verbose();
			continue;
		} else if (strcmp(a, "-n") == 0 || strcmp(a, "--dry-run") == 0) {
			dry_run = true;
			continue;
		} else if (a[0] == '-' && a[1] && strchr("hVvn", a[1]) && a[2]) {
			/* Grouped short options: -vn is -v -n.  This one now,
			 * then the rest as an argument of its own. */
			if (a[1] == 'h') {
				usage();
				return 0;
			}
			if (a[1] == 'V') {
				printf("nosigbus %s\n%s\n", NSB_VERSION, NSB_URL);
				return 0;
			}
			if (a[1] == 'v')
				verbose();
			else
				dry_run = true;
			argv[i--] = str_printf("-%s", a + 2);
			continue;
		} else if (a[0] == '-' && a[1]) {
			usage_error(str_printf("unknown option '%s'", a));
		} else {
			break;
		}
		switch (opt) {
		case 'p':
			set_option("NOSIGBUS_POLICY", policy_words, "policy", "flag, shm or files", v);
			break;
		case 'f':
			set_option("NOSIGBUS_FILL", fill_words, "fill", "page, range or auto", v);
			break;
		default:
			set_option("NOSIGBUS_ERRORS", errors_words, "errors", "pass, peer or zero", v);
			break;
		}
	}
	if (i >= argc)
		usage_error("missing COMMAND");
	cmd = argv[i];

	for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++)
		check_setting(&settings[k]);

	find_library(argv[0]);
	/* The loader splits LD_PRELOAD at blanks and colons, with no way to
	 * quote one: such a path would preload pieces of it, and COMMAND
	 * would run unprotected after the loader's complaint. */
	if (strpbrk(library, ": ")) {
		say("the library's path %s has a blank or a colon, which LD_PRELOAD cannot hold; set NOSIGBUS_LIBRARY to a path without one",
		    library);
		exit(2);
	}
	find_command(cmd);

	/* -n and -v ask for everything that can be known.  The system's own
	 * programs are not read unless asked: Debian links them dynamically,
	 * sanitizers are for test builds, and their scripts' interpreters
	 * are there. */
	log = getenv("NOSIGBUS_LOG");
	asked = dry_run || (log && *log && strcmp(word_of(log_words, log), "0") != 0);
	if (cmd_path && (asked || !system_program(cmd_path)))
		inspect(cmd_path, &in);
	/* The kernel's ENOENT for a missing interpreter reads, from exec, as
	 * if the script itself were missing. */
	if (cmd_path && in.script) {
		if (!in.interp[0])
			command_fail(126, str_printf("%s: its #! line names no interpreter", cmd));
		else if (!exists(in.interp))
			command_fail(126, str_printf("%s: its interpreter %s does not exist (#! line)",
						     cmd, in.interp));
		else if (is_dir(in.interp) || !executable(in.interp))
			command_fail(126, str_printf("%s: its interpreter %s cannot be executed (#! line)",
						     cmd, in.interp));
	}
	if (cmd_path) {
		struct stat st;

		/* Warnings only: the command still runs, unprotected. */
		if (in.elf_static)
			say("warning: %s is statically linked: LD_PRELOAD cannot load libnosigbus into it, so it runs unprotected",
			    cmd);
		if (stat(cmd_path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) && !secure_installed())
			say("warning: %s is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD when it runs with other credentials, so it may run unprotected",
			    cmd);
		/* File capabilities: only when asked for (-n, -v), as before. */
		if (asked && !secure_installed() &&
		    getxattr(cmd_path, "security.capability", NULL, 0) > 0)
			say("warning: %s has file capabilities: the dynamic loader ignores LD_PRELOAD for it, so it may run unprotected",
			    cmd);
	}

	preload = build_preload(in.sanitizer);

	if (dry_run) {
		/* What the library will use in COMMAND: set by an option,
		 * inherited, or the default. */
		for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++) {
			const char *value = getenv(settings[k].name);

			printf("%s=%s\n", settings[k].name,
			       value && *value ? word_of(settings[k].words, value) : settings[k].dflt);
		}
		printf("LD_PRELOAD=%s\n", quote(preload));
		for (int k = i; k < argc; k++)
			printf("%s%s", k > i ? " " : "", quote(argv[k]));
		putchar('\n');
		return output_done();
	}

	setenv("LD_PRELOAD", preload, 1);
	/* A name with a leading '-' runs as the path found; else as given,
	 * as the shell's exec does. */
	if (cmd[0] == '-')
		argv[i] = cmd_path;
	execv(cmd_path, argv + i);
	if (errno == ENOEXEC) {
		/* No #! line: a shell runs it, as exec in a shell does. */
		char **sh = calloc((size_t)(argc - i) + 2, sizeof(*sh));

		if (sh) {
			sh[0] = "/bin/sh";
			sh[1] = cmd_path;
			for (int k = i + 1; k < argc; k++)
				sh[k - i + 1] = argv[k];
			execv("/bin/sh", sh);
		}
	}
	/* The message may change errno (stderr on a full disk, closed). */
	err = errno;
	say("%s: %s", cmd, strerror(err));
	return err == ENOENT ? 127 : 126;
}
