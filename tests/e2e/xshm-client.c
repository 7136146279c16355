/* SPDX-License-Identifier: MIT */
/*
 * An X client that does to an X server what hostile-client.c does to a
 * Wayland compositor: it hands the server a file through MIT-SHM 1.2's fd
 * passing (xcb_shm_attach_fd, which the server receives with recvmsg and
 * maps shared), lets the server read it once, shrinks the file and asks
 * the server to read it again.
 *
 *   xshm-client [--backing memfd|shm|disk|sealed|fuse] [--dir DIR]
 *               [--truncate-to BYTES] [--no-truncate]
 *               [--colour RRGGBB] [--size WxH]
 *
 * The file (backing.h) holds a WxH (default 64x48) image of the colour
 * (default 33cc66), 32 bits a pixel. The client attaches it as a segment
 * and copies it into a pixmap of the root window's depth with ShmPutImage
 * (the server reads the file then, inside the request), reads the pixmap
 * back with GetImage, then truncates the file to BYTES (default 0) and
 * does it twice more, then detaches the segment. Each request's outcome is
 * a line:
 *
 *   mit-shm 1.2            the server's MIT-SHM version (1.2 or later)
 *   attach: ok
 *   put: ok                or "put: error NAME" (BadShmSeg, BadAccess...)
 *   image: RRGGBB          the pixmap, when all its pixels are one colour,
 *                          else "image: RRGGBB*COUNT RRGGBB*COUNT..."
 *   truncated
 *   put: ...   image: ...  (after the truncation)
 *   put: ...   image: ...  (again: an X server that caught the fault frees
 *                          the segment after the request, see xshm.bats)
 *   detach: ...
 *
 * With --backing sealed the file is a memfd of one page, filled with the
 * colour and sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, shorter
 * than the image the client then puts from it (its first rows fit the
 * page).  MIT-SHM carries no size: the server maps the file's size as
 * fstat gives it at ShmAttachFd and checks every ShmPutImage against it,
 * so the full put is refused (an error line) and nothing can fault; the
 * lines are those above with "sealed" for "truncated" and nothing
 * truncated, then one more put of the rows that fit the page ("put page:
 * ...", "image: ...").
 *
 * With --backing fuse the file is the one file of a FUSE file system of
 * the client's own (fuse-pool.h, shared with hostile-client): "truncating"
 * makes every read at or past BYTES fail with EIO and drops the file's
 * pages from the server's mapping, so the server's next read faults
 * inside the file's size.  Where FUSE cannot be mounted (or the client
 * was built without libfuse3) it says "no fuse: REASON" and exits with 6.
 *
 * Exit status: 0 when every request was answered (errors included: the
 * test reads them); 4 when the connection was lost (the server died);
 * 1 for setup failures (no MIT-SHM 1.2, no depth of 32 bits a pixel);
 * 2 for bad usage.  Every request is checked, so it is answered before the
 * next one is sent: no timing is involved.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xcb/shm.h>
#include <xcb/xcb.h>

#include "backing.h"
#ifdef NSB_HAVE_FUSE
#include "fuse-pool.h"
#endif

enum {
	EXIT_SETUP = 1,
	EXIT_USAGE = 2,
	EXIT_LOST = 4,
	EXIT_NO_FUSE = 6,
};

struct client {
	xcb_connection_t *conn;
	uint8_t shm_first_error;
	xcb_pixmap_t pixmap;
	xcb_gcontext_t gc;
	xcb_shm_seg_t seg;
	uint8_t depth;
	uint16_t width, height;
};

static void __attribute__((noreturn))
lost(void)
{
	printf("disconnected\n");
	fflush(stdout);
	exit(EXIT_LOST);
}

/* The X error's name, for the errors these requests can get. */
static const char *
error_name(const struct client *c, const xcb_generic_error_t *e)
{
	static char buf[32];

	if (e->error_code == c->shm_first_error + XCB_SHM_BAD_SEG)
		return "BadShmSeg";
	switch (e->error_code) {
	case XCB_VALUE:
		return "BadValue";
	case XCB_MATCH:
		return "BadMatch";
	case XCB_DRAWABLE:
		return "BadDrawable";
	case XCB_ACCESS:
		return "BadAccess";
	case XCB_ALLOC:
		return "BadAlloc";
	case XCB_IMPLEMENTATION:
		return "BadImplementation";
	}
	snprintf(buf, sizeof(buf), "error code %u", e->error_code);
	return buf;
}

/* Prints "WHAT: ok" or "WHAT: error NAME" for a checked request. */
static void
report(struct client *c, const char *what, xcb_void_cookie_t cookie)
{
	xcb_generic_error_t *e = xcb_request_check(c->conn, cookie);

	if (xcb_connection_has_error(c->conn))
		lost();
	if (e) {
		printf("%s: error %s\n", what, error_name(c, e));
		free(e);
	} else {
		printf("%s: ok\n", what);
	}
}

/* Puts the image's first rows (all of them when rows is its height). */
static void
put_rows(struct client *c, const char *what, uint16_t rows)
{
	report(c, what, xcb_shm_put_image_checked(c->conn, c->pixmap, c->gc,
		c->width, rows, 0, 0, c->width, rows, 0, 0,
		c->depth, XCB_IMAGE_FORMAT_Z_PIXMAP, 0, c->seg, 0));
}

static void
put(struct client *c)
{
	put_rows(c, "put", c->height);
}

/*
 * Reads the pixmap back and prints its colours in order of appearance,
 * "RRGGBB" alone when there is one, else "RRGGBB*COUNT" each (at most 4).
 */
static void
image(struct client *c)
{
	xcb_get_image_reply_t *r;
	const uint32_t *px;
	uint32_t colours[4];
	int n, counts[4], distinct = 0, others = 0;

	r = xcb_get_image_reply(c->conn, xcb_get_image(c->conn,
		XCB_IMAGE_FORMAT_Z_PIXMAP, c->pixmap, 0, 0, c->width,
		c->height, ~0u), NULL);
	if (xcb_connection_has_error(c->conn))
		lost();
	if (r == NULL) {
		printf("image: error\n");
		return;
	}
	n = xcb_get_image_data_length(r) / 4;
	px = (const uint32_t *)xcb_get_image_data(r);
	for (int i = 0; i < n; i++) {
		uint32_t v = px[i] & 0xffffffu;
		int j;

		for (j = 0; j < distinct && colours[j] != v; j++)
			;
		if (j < distinct) {
			counts[j]++;
		} else if (distinct < 4) {
			colours[distinct] = v;
			counts[distinct++] = 1;
		} else {
			others++;
		}
	}
	printf("image:");
	for (int j = 0; j < distinct; j++)
		if (distinct == 1)
			printf(" %06x", colours[j]);
		else
			printf(" %06x*%d", colours[j], counts[j]);
	if (others)
		printf(" others*%d", others);
	printf("\n");
	free(r);
}

/* The root window's depth, if it has a ZPixmap format of 32 bits a pixel. */
static int
depth_32bpp(const xcb_setup_t *setup, uint8_t depth)
{
	xcb_format_iterator_t f = xcb_setup_pixmap_formats_iterator(setup);

	for (; f.rem; xcb_format_next(&f))
		if (f.data->depth == depth && f.data->bits_per_pixel == 32)
			return 0;
	return -1;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: xshm-client [--backing memfd|shm|disk|sealed|fuse] "
		"[--dir DIR] [--truncate-to BYTES] [--no-truncate] "
		"[--colour RRGGBB] [--size WxH]\n");
	exit(EXIT_USAGE);
}

int
main(int argc, char **argv)
{
	struct client c = { .width = 64, .height = 48 };
	enum backing backing = BACKING_MEMFD;
	bool sealed = false, fuse = false;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef NSB_HAVE_FUSE
	struct fuse_pool fuse_pool;
#endif
	const char *dir = "/var/tmp";
	uint32_t colour = 0x33cc66;
	bool truncate_it = true;
	long truncate_to = 0;
	const xcb_query_extension_reply_t *ext;
	xcb_shm_query_version_reply_t *version;
	xcb_screen_t *screen;
	size_t size;
	int fd, copy;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--backing") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "sealed") == 0)
				sealed = true;
			else if (strcmp(argv[i], "fuse") == 0)
				fuse = true;
			else if (parse_backing(argv[i], &backing) < 0)
				usage();
		} else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--truncate-to") == 0 &&
			   i + 1 < argc) {
			truncate_to = strtol(argv[++i], &end, 10);
			if (*end != '\0' || truncate_to < 0)
				usage();
		} else if (strcmp(argv[i], "--no-truncate") == 0) {
			truncate_it = false;
		} else if (strcmp(argv[i], "--colour") == 0 && i + 1 < argc) {
			colour = (uint32_t)strtoul(argv[++i], &end, 16);
			if (*end != '\0' || colour == 0 || colour > 0xffffff)
				usage();
		} else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			unsigned w, h;

			if (sscanf(argv[++i], "%ux%u", &w, &h) != 2 ||
			    w == 0 || h == 0 || w > 4096 || h > 4096)
				usage();
			c.width = (uint16_t)w;
			c.height = (uint16_t)h;
		} else {
			usage();
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sealed && ((size_t)c.width * 4 > page ||
		       (size_t)c.width * c.height * 4 <= page))
		usage();	/* a row must fit the page, the image must not */
	if (fuse) {
		/* Before connecting: the server process holds no X socket. */
#ifdef NSB_HAVE_FUSE
		if (fuse_pool_start(&fuse_pool) < 0) {
			printf("no fuse: %s\n", fuse_pool.why);
			return EXIT_NO_FUSE;
		}
#else
		printf("no fuse: xshm-client was built without libfuse3\n");
		return EXIT_NO_FUSE;
#endif
	}

	c.conn = xcb_connect(NULL, NULL);
	if (xcb_connection_has_error(c.conn)) {
		fprintf(stderr, "xshm-client: cannot connect to %s\n",
			getenv("DISPLAY") ? getenv("DISPLAY") : "(no DISPLAY)");
		return EXIT_SETUP;
	}
	ext = xcb_get_extension_data(c.conn, &xcb_shm_id);
	if (ext == NULL || !ext->present) {
		fprintf(stderr, "xshm-client: the server has no MIT-SHM\n");
		return EXIT_SETUP;
	}
	c.shm_first_error = ext->first_error;
	version = xcb_shm_query_version_reply(c.conn,
		xcb_shm_query_version(c.conn), NULL);
	if (version == NULL || (version->major_version == 1 &&
				version->minor_version < 2)) {
		fprintf(stderr, "xshm-client: MIT-SHM 1.2 (fd passing) "
			"is not there\n");
		return EXIT_SETUP;
	}
	printf("mit-shm %u.%u\n", version->major_version,
	       version->minor_version);
	free(version);

	screen = xcb_setup_roots_iterator(xcb_get_setup(c.conn)).data;
	c.depth = screen->root_depth;
	if (depth_32bpp(xcb_get_setup(c.conn), c.depth) < 0) {
		fprintf(stderr, "xshm-client: depth %u is not 32 bits a "
			"pixel\n", c.depth);
		return EXIT_SETUP;
	}
	c.pixmap = xcb_generate_id(c.conn);
	xcb_create_pixmap(c.conn, c.depth, c.pixmap, screen->root, c.width,
			  c.height);
	c.gc = xcb_generate_id(c.conn);
	xcb_create_gc(c.conn, c.gc, c.pixmap, 0, NULL);

	size = (size_t)c.width * c.height * 4;
	if (fuse) {
#ifdef NSB_HAVE_FUSE
		fd = fuse_pool_open(&fuse_pool, size, colour);
		if (fd < 0)
			return EXIT_SETUP;
#endif
	} else {
		fd = sealed ? memfd_create("nosigbus-hostile-sealed",
					   MFD_CLOEXEC | MFD_ALLOW_SEALING)
			    : open_backing(backing, dir, "xshm-client");
		if (fd < 0) {
			perror("xshm-client: memfd_create");
			return EXIT_SETUP;
		}
		if (sealed)
			size = page;
		if (ftruncate(fd, (off_t)size) < 0) {
			perror("xshm-client: ftruncate");
			return EXIT_SETUP;
		}
		if (fill_backing(fd, size, colour, "xshm-client") < 0)
			return EXIT_SETUP;
		if (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK |
				    F_SEAL_GROW | F_SEAL_SEAL) < 0) {
			perror("xshm-client: F_ADD_SEALS");
			return EXIT_SETUP;
		}
	}

	/* xcb closes the descriptor it sends: it gets a copy. */
	c.seg = xcb_generate_id(c.conn);
	copy = dup(fd);
	if (copy < 0) {
		perror("xshm-client: dup");
		return EXIT_SETUP;
	}
	report(&c, "attach", xcb_shm_attach_fd_checked(c.conn, c.seg, copy,
						       1));

	put(&c);
	image(&c);
	if (sealed) {
		printf("sealed\n");
	} else if (truncate_it && fuse) {
#ifdef NSB_HAVE_FUSE
		if (fuse_pool_fail(&fuse_pool, (off_t)truncate_to) < 0)
			return EXIT_SETUP;
		printf("truncated\n");
#endif
	} else if (truncate_it) {
		if (ftruncate(fd, (off_t)truncate_to) < 0) {
			perror("xshm-client: ftruncate");
			return EXIT_SETUP;
		}
		printf("truncated\n");
	}
	for (int n = 0; n < 2; n++) {
		put(&c);
		image(&c);
	}
	if (sealed) {
		put_rows(&c, "put page", (uint16_t)(page / ((size_t)c.width * 4)));
		image(&c);
	}
	report(&c, "detach", xcb_shm_detach_checked(c.conn, c.seg));

	xcb_free_gc(c.conn, c.gc);
	xcb_free_pixmap(c.conn, c.pixmap);
	xcb_disconnect(c.conn);
	close(fd);
	return 0;
}
