/* SPDX-License-Identifier: MIT */
/*
 * A Wayland client that does what the LWN article warns about: it shares an
 * shm buffer with the compositor, lets the compositor read it once, then
 * shrinks the file to nothing and keeps committing the buffer, so every
 * repaint makes the compositor read pages beyond the end of the file.
 *
 *   hostile-client [--pause] [--no-truncate] [--truncate-to BYTES]
 *                  [--backing memfd|shm|disk|fuse] [--dir DIR]
 *                  [--regrow RRGGBB [--resize]] [--no-ack]
 *                  [--sealed-resize] [--colour RRGGBB] [--size WxH]
 *                  [--subsurface | --cursor | --shadow [--destroy-buffer]] N
 *   hostile-client --keymap-attack memfd|sealed|fuse [--keymap-size BYTES]
 *   hostile-client --screencopy [--no-truncate]
 *
 * It maps an ordinary xdg_toplevel of WxH (default 128x96) with an XRGB8888
 * buffer filled with the colour (default 33cc66), commits and waits for the
 * first frame callback ("frame 0"). Then it ftruncate()s the file to 0, or
 * to BYTES with --truncate-to (unless --no-truncate), and attaches, damages
 * and commits N more times, each time waiting for the frame callback
 * ("frame 1".."frame N"). A test counts the window's pixels in a
 * screenshot, wherever the shell placed it.
 *
 * The pool's file (--backing, backing.h) is a memfd (the default), a file
 * in /dev/shm, or a file on disk in DIR (default /var/tmp); or, with
 * --backing fuse, the file of a FUSE file system of the client's own
 * (fuse-pool.h), where "truncating" makes every read at or past BYTES
 * fail with EIO and drops the file's pages from the compositor's
 * mapping: its next read faults inside the file's size.  Where no FUSE
 * file system can be mounted (or the client was built without libfuse3)
 * it says "no fuse: REASON" and exits with 6.
 *
 * With --regrow, after frame N the client recovers: it grows the file back
 * to its size plus one page, fills it with the new colour, with --resize
 * sends wl_shm_pool.resize for the new size (the pool grows, which makes
 * libwayland-server mremap it), and attaches a new buffer at offset 0 of
 * the same pool, for two more frames ("regrown", "regrown frame 1",
 * "regrown frame 2").
 *
 * With --sealed-resize the pool is a memfd of one page, filled with the
 * colour and sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL: it can never
 * change size.  The pool is created at that page and grown with
 * wl_shm_pool.resize to the buffer's size, so that the buffer runs past
 * the file's end from the first frame.  libwayland-server installs no
 * SIGBUS handling for a pool whose memfd cannot shrink, so the
 * compositor's read past the end kills it without the library (measured
 * with Debian 12's weston, sway, cage, mutter and kwin).  Nothing is
 * truncated (the seals forbid it): implies --no-truncate.
 *
 * With --subsurface the hostile pool's buffer is shown on a subsurface
 * (wl_subcompositor.get_subsurface, synchronized, at 0,0) of the toplevel,
 * whose own buffer, of the same size and colour, is a memfd the client
 * never touches; each frame commits the subsurface (with the frame
 * callback: Mir 2.12 answers none on the toplevel then), then the toplevel.
 * Exits with 5 (and "no wl_subcompositor") where it is not offered.
 *
 * With --cursor the hostile pool's buffer is the pointer's cursor
 * (wl_pointer.set_cursor, at the serial of the pointer's enter into the
 * toplevel, whose own buffer is good); each frame commits the cursor
 * surface, then the toplevel (with the frame callback).  Where the
 * compositor offers wlroots' virtual pointer (zwlr_virtual_pointer_manager_v1,
 * protocols/ has the XML) the client makes one on the seat (which gives
 * a headless seat its pointer), and once the toplevel shows moves it to
 * the middle of the output (motion_absolute, frame): a tiled or
 * fullscreen window is under it there (a floating one, Mir's, when it is
 * large enough: the test asks for 1000x700), and the pointer enters.  Every
 * frame moves it again by a pixel, so that the compositor draws the
 * cursor anew.  Exits with 5 and "no pointer" where the seat has no
 * pointer capability ("no pointer (no zwlr_virtual_pointer_manager_v1)"
 * where no virtual pointer could give it one), or "no pointer enter"
 * where the pointer never enters the window (within 5 seconds after it
 * shows).
 *
 * With --shadow the hostile pool's buffer is every element of kwin's
 * shadow of the toplevel (org_kde_kwin_shadow_manager.create on its
 * surface; the XML is Debian's plasma-wayland-protocols): the eight
 * org_kde_kwin_shadow.attach_* take it, the four offsets are 16 pixels,
 * org_kde_kwin_shadow.commit, then the toplevel, whose own buffer is good,
 * is committed (with the frame callback), which applies the shadow.  kwin
 * 5.27 reads the tiles (it copies each buffer's pixels) when the surface's
 * shadow changes, not at a shadow's commit: every frame makes a new
 * shadow.  With --destroy-buffer the wl_buffer is destroyed after each
 * shadow's commit (the shadow keeps it; a new buffer takes its place in
 * the pool): kwin then copies the pixels through a QImage it saved over
 * the pool, outside libwayland's wl_shm_buffer_begin_access.  Exits with
 * 5 and "no org_kde_kwin_shadow_manager" where it is not offered.
 *
 * With --keymap-attack there is no window: the client makes a virtual
 * keyboard (zwp_virtual_keyboard_manager_v1, on the first wl_seat) and
 * sends zwp_virtual_keyboard_v1.keymap with a file of one page and a size
 * of 16 pages (or BYTES).  The page holds a valid keymap, short (it
 * includes the system's "evdev", "complete" and "pc+us"), padded with
 * spaces: no NUL in the file, so a compositor that maps the size and
 * parses it as a string (wlroots hands it to xkbcommon, whose strlen runs
 * on) reads past the file's end; where that reads zeros (the library),
 * the string ends with the page and the keymap is good.  The file is a
 * memfd, or with "sealed" a memfd sealed F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_SEAL; or with "fuse" the file of a FUSE file system of its own
 * (fuse-pool.h) as long as the size, whose reads past the first page
 * fail with EIO: the string runs on inside the file's size.  Then it presses and releases a key, and ends after a
 * roundtrip ("keymap sent", "key sent", "connected after keymap"), with
 * the statuses below; 5 (and "no zwp_virtual_keyboard_manager_v1") when
 * the compositor does not offer the global.  The protocol's XML is in
 * protocols/ (Debian packages none).
 *
 * With --screencopy there is no window either: the client asks wlroots'
 * screencopy (zwlr_screencopy_manager_v1, protocols/ has the XML) for a
 * frame of the first wl_output, takes the wl_shm buffer it announces
 * ("buffer WxH stride S"), makes it in a memfd of that size, lets the
 * compositor map the pool (a roundtrip), truncates the memfd to 0
 * ("truncated"; not with --no-truncate) and asks for the copy: the
 * compositor WRITES the output's pixels past the file's end.  Then
 * "ready" or "failed" (the frame's answer), and "connected after copy"
 * after a roundtrip; 5 (and "no zwlr_screencopy_manager_v1") where the
 * compositor does not offer it.
 *
 * Every configure is acknowledged at the next commit, the buffer keeping
 * its size; with --no-ack only the first one is (a tiling shell then
 * shows the window only when its transaction times out: what made sway
 * 1.7 read a truncated pool after its client had gone, doc/compositors.md).
 *
 * With --pause it stops and waits for a line on stdin, still serving the
 * connection: after frame 0 (before the truncation), after frame N and,
 * with --regrow, after the regrown frames, so that a test can take
 * screenshots while the window is on screen.
 *
 * Exit status: 0 after N frames and a final roundtrip; 3 when the compositor
 * disconnected it with a protocol error (printed, and libwayland-client logs
 * the compositor's message on stderr); 4 when the connection was lost
 * otherwise (the compositor died); 1 for setup failures; 2 for bad usage.
 * Synchronisation is by roundtrips and frame callbacks only, never by time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <wayland-client.h>

#include "backing.h"
#ifdef NSB_HAVE_FUSE
#include "fuse-pool.h"
#endif
#include "shadow-client-protocol.h"
#include "virtual-keyboard-unstable-v1-client-protocol.h"
#include "wlr-screencopy-unstable-v1-client-protocol.h"
#include "wlr-virtual-pointer-unstable-v1-client-protocol.h"
#include "xdg-shell-client-protocol.h"

enum {
	EXIT_SETUP = 1,
	EXIT_USAGE = 2,
	EXIT_PROTOCOL = 3,
	EXIT_LOST = 4,
	EXIT_NO_GLOBAL = 5,
	EXIT_NO_FUSE = 6,
};

/* --keymap-attack: the keymap at the start of its file (spaces follow). */
#define KEYMAP_TEXT                                                        \
	"xkb_keymap {\n"                                                   \
	"  xkb_keycodes { include \"evdev+aliases(qwerty)\" };\n"          \
	"  xkb_types { include \"complete\" };\n"                           \
	"  xkb_compat { include \"complete\" };\n"                          \
	"  xkb_symbols { include \"pc+us+inet(evdev)\" };\n"                \
	"};\n"

/* The window size used unless --size or the shell chooses another. */
#define DEFAULT_WIDTH 128
#define DEFAULT_HEIGHT 96

struct client {
	struct wl_display *display;
	struct wl_registry *registry;
	struct wl_compositor *compositor;
	struct wl_shm *shm;
	struct xdg_wm_base *wm_base;
	struct wl_seat *seat;			/* --keymap-attack only */
	struct wl_subcompositor *subcompositor;	/* --subsurface only */
	struct wl_output *output;		/* --screencopy only */
	struct wl_pointer *pointer;		/* --cursor only */
	uint32_t seat_caps, enter_serial;
	bool entered;
	struct zwlr_virtual_pointer_manager_v1 *vp_manager;	/* --cursor */
	struct zwlr_virtual_pointer_v1 *vpointer;
	uint32_t vp_moves;	/* motions sent: each goes a pixel apart */
	struct org_kde_kwin_shadow_manager *shadow_manager;	/* --shadow */
	struct zwlr_screencopy_manager_v1 *sc_manager;
	uint32_t sc_format, sc_width, sc_height, sc_stride;
	int sc_state;		/* 0 waiting, 1 buffer_done, 2 ready, 3 failed */
	bool sc_v3;
	struct wl_surface *parent;		/* --subsurface: the toplevel's */
	struct wl_subsurface *subsurface;
	struct wl_buffer *parent_buffer;
	int parent_fd;
	struct zwp_virtual_keyboard_manager_v1 *vk_manager;
	struct wl_surface *surface;
	struct xdg_surface *xdg_surface;
	struct xdg_toplevel *toplevel;
	struct wl_shm_pool *pool;
	struct wl_buffer *buffer;
	int memfd;		/* the pool's file, whatever its backing */
	size_t size;		/* the buffer's bytes */
	int32_t pending_width, pending_height;
	uint32_t configure_serial;
	bool configured;
	bool ack_pending;	/* a configure to acknowledge at the next commit */
	bool no_ack;		/* --no-ack */
	bool frame_done;
	bool closed;
	bool keyboard;		/* --keymap-attack: bind the seat and manager */
	bool fuse;		/* --backing fuse */
	bool sub;		/* --subsurface */
	bool screencopy;	/* --screencopy */
	bool cursor;		/* --cursor */
	bool shadow;		/* --shadow */
	bool destroy_buffer;	/* --shadow --destroy-buffer */
#ifdef NSB_HAVE_FUSE
	struct fuse_pool fuse_pool;
#endif
};

/* Prints why the connection ended and exits with the matching status. */
static void __attribute__((noreturn))
die_disconnected(struct client *c)
{
	int err = wl_display_get_error(c->display);

	if (err == EPROTO) {
		const struct wl_interface *iface = NULL;
		uint32_t id = 0;
		uint32_t code;

		code = wl_display_get_protocol_error(c->display, &iface, &id);
		printf("disconnected: protocol error %u on %s@%u\n", code,
		       iface ? iface->name : "unknown", id);
		fflush(stdout);
		exit(EXIT_PROTOCOL);
	}
	printf("disconnected: %s\n", strerror(err ? err : EPIPE));
	fflush(stdout);
	exit(EXIT_LOST);
}

static void
dispatch_or_die(struct client *c)
{
	if (wl_display_dispatch(c->display) < 0)
		die_disconnected(c);
}

static void
roundtrip_or_die(struct client *c)
{
	if (wl_display_roundtrip(c->display) < 0)
		die_disconnected(c);
}

static void
wm_base_ping(void *data, struct xdg_wm_base *wm_base, uint32_t serial)
{
	xdg_wm_base_pong(wm_base, serial);
}

static const struct xdg_wm_base_listener wm_base_listener = {
	.ping = wm_base_ping,
};

static void
registry_global(void *data, struct wl_registry *registry, uint32_t name,
		const char *interface, uint32_t version)
{
	struct client *c = data;

	if (strcmp(interface, wl_compositor_interface.name) == 0) {
		c->compositor = wl_registry_bind(registry, name,
						 &wl_compositor_interface, 1);
	} else if (strcmp(interface, wl_shm_interface.name) == 0) {
		c->shm = wl_registry_bind(registry, name, &wl_shm_interface, 1);
	} else if (strcmp(interface, xdg_wm_base_interface.name) == 0) {
		c->wm_base = wl_registry_bind(registry, name,
					      &xdg_wm_base_interface, 1);
		xdg_wm_base_add_listener(c->wm_base, &wm_base_listener, c);
	} else if (c->screencopy && c->output == NULL &&
		   strcmp(interface, wl_output_interface.name) == 0) {
		c->output = wl_registry_bind(registry, name, &wl_output_interface, 1);
	} else if (c->screencopy &&
		   strcmp(interface, zwlr_screencopy_manager_v1_interface.name) == 0) {
		c->sc_v3 = version >= 3;
		c->sc_manager = wl_registry_bind(registry, name,
						 &zwlr_screencopy_manager_v1_interface,
						 c->sc_v3 ? 3 : 1);
	} else if (c->sub &&
		   strcmp(interface, wl_subcompositor_interface.name) == 0) {
		c->subcompositor = wl_registry_bind(registry, name,
						    &wl_subcompositor_interface, 1);
	} else if ((c->keyboard || c->cursor) && c->seat == NULL &&
		   strcmp(interface, wl_seat_interface.name) == 0) {
		c->seat = wl_registry_bind(registry, name, &wl_seat_interface, 1);
	} else if (c->cursor &&
		   strcmp(interface, zwlr_virtual_pointer_manager_v1_interface.name) == 0) {
		c->vp_manager = wl_registry_bind(registry, name,
						 &zwlr_virtual_pointer_manager_v1_interface, 1);
	} else if (c->shadow &&
		   strcmp(interface, org_kde_kwin_shadow_manager_interface.name) == 0) {
		c->shadow_manager = wl_registry_bind(registry, name,
						     &org_kde_kwin_shadow_manager_interface, 1);
	} else if (c->keyboard &&
		   strcmp(interface, zwp_virtual_keyboard_manager_v1_interface.name) == 0) {
		c->vk_manager = wl_registry_bind(registry, name,
						 &zwp_virtual_keyboard_manager_v1_interface, 1);
	}
}

static void
registry_global_remove(void *data, struct wl_registry *registry, uint32_t name)
{
}

static const struct wl_registry_listener registry_listener = {
	.global = registry_global,
	.global_remove = registry_global_remove,
};

static void
xdg_surface_configure(void *data, struct xdg_surface *xdg_surface,
		      uint32_t serial)
{
	struct client *c = data;

	c->configure_serial = serial;
	c->configured = true;
	c->ack_pending = true;
}

static const struct xdg_surface_listener xdg_surface_listener = {
	.configure = xdg_surface_configure,
};

static void
toplevel_configure(void *data, struct xdg_toplevel *toplevel, int32_t width,
		   int32_t height, struct wl_array *states)
{
	struct client *c = data;

	c->pending_width = width;
	c->pending_height = height;
}

static void
toplevel_close(void *data, struct xdg_toplevel *toplevel)
{
	struct client *c = data;

	c->closed = true;
}

static const struct xdg_toplevel_listener toplevel_listener = {
	.configure = toplevel_configure,
	.close = toplevel_close,
};

static void
frame_done(void *data, struct wl_callback *callback, uint32_t time)
{
	struct client *c = data;

	c->frame_done = true;
	wl_callback_destroy(callback);
}

static const struct wl_callback_listener frame_listener = {
	.done = frame_done,
};

/*
 * The X byte is "don't care", but weston 10's pixman renderer blends it
 * as alpha: 0xff keeps the colour, and a zero page (all bytes 0) shows as
 * black.
 */
static int
fill(int fd, size_t size, uint32_t colour)
{
	return fill_backing(fd, size, 0xff000000u | colour, "hostile-client");
}

/*
 * A sealed memfd of one page, filled and sealed against any change of
 * size, as the pool of a size-c->size buffer: created at the page, then
 * resized (--sealed-resize).
 */
static int
create_sealed_pool(struct client *c, uint32_t colour)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	c->memfd = memfd_create("nosigbus-hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->memfd < 0) {
		perror("hostile-client: memfd_create");
		return -1;
	}
	if (ftruncate(c->memfd, (off_t)page) < 0 || fill(c->memfd, page, colour) < 0 ||
	    fcntl(c->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		perror("hostile-client: sealing");
		return -1;
	}
	c->pool = wl_shm_create_pool(c->shm, c->memfd, (int32_t)page);
	if (c->size > page)
		wl_shm_pool_resize(c->pool, (int32_t)c->size);
	return 0;
}

/* An XRGB8888 buffer at offset 0 of the pool, c->size bytes. */
static void
create_buffer(struct client *c, int32_t width, int32_t height)
{
	c->buffer = wl_shm_pool_create_buffer(c->pool, 0, width, height,
					      width * 4,
					      WL_SHM_FORMAT_XRGB8888);
}

/* A pool over a fresh file of the backing, filled with the colour. */
static int
create_pool(struct client *c, enum backing backing, const char *dir,
	    int32_t width, int32_t height, uint32_t colour)
{
	c->size = (size_t)width * 4 * (size_t)height;
#ifdef NSB_HAVE_FUSE
	if (c->fuse) {
		/* The file system serves the pixels: nothing to write. */
		c->memfd = fuse_pool_open(&c->fuse_pool, c->size, 0xff000000u | colour);
		if (c->memfd < 0)
			return -1;
		c->pool = wl_shm_create_pool(c->shm, c->memfd, (int32_t)c->size);
		create_buffer(c, width, height);
		return 0;
	}
#endif
	c->memfd = open_backing(backing, dir, "hostile-client");
	if (c->memfd < 0)
		return -1;
	if (ftruncate(c->memfd, (off_t)c->size) < 0) {
		perror("hostile-client: ftruncate");
		return -1;
	}
	if (fill(c->memfd, c->size, colour) < 0)
		return -1;
	c->pool = wl_shm_create_pool(c->shm, c->memfd, (int32_t)c->size);
	create_buffer(c, width, height);
	return 0;
}

/*
 * Recovery: the file grows back, one page longer than before (a resize to
 * the pool's own size would change nothing: libwayland-server remaps a
 * pool only when its size changes), with the new colour; with resize the
 * pool is told; a new buffer at offset 0 replaces the old one.
 */
static int
regrow(struct client *c, int32_t width, int32_t height, uint32_t colour,
       bool resize)
{
	size_t grown = c->size + (size_t)sysconf(_SC_PAGESIZE);

	if (ftruncate(c->memfd, (off_t)grown) < 0) {
		perror("hostile-client: ftruncate to regrow");
		return -1;
	}
	if (fill(c->memfd, c->size, colour) < 0)
		return -1;
	if (resize)
		wl_shm_pool_resize(c->pool, (int32_t)grown);
	wl_buffer_destroy(c->buffer);
	create_buffer(c, width, height);
	return 0;
}

/*
 * --cursor with a virtual pointer: to the middle of the output, a pixel
 * right of it every other time (in an extent of the output's size in
 * pixels as far as the client knows: 2 * 4096 covers any here), so that
 * every call is a motion that makes the compositor draw the cursor again.
 */
static void
move_virtual_pointer(struct client *c)
{
	uint32_t x = 4096 + (c->vp_moves++ & 1);

	if (c->vpointer == NULL)
		return;
	zwlr_virtual_pointer_v1_motion_absolute(c->vpointer, c->vp_moves, x, 4096,
						8192, 8192);
	zwlr_virtual_pointer_v1_frame(c->vpointer);
}

/*
 * --shadow: a new shadow of the toplevel (kwin reads a shadow's buffers
 * when the surface's shadow changes, never at a mere
 * org_kde_kwin_shadow.commit), the hostile buffer as its eight elements,
 * 16 pixels out on every side; applied at the toplevel's next commit.
 * With --destroy-buffer the buffer is destroyed after the shadow's commit
 * (the shadow keeps it) and a new one made at the same place of the pool.
 */
static void
commit_shadow(struct client *c, int32_t width, int32_t height)
{
	struct org_kde_kwin_shadow *s;
	wl_fixed_t offset = wl_fixed_from_int(16);

	s = org_kde_kwin_shadow_manager_create(c->shadow_manager, c->parent);

	org_kde_kwin_shadow_attach_left(s, c->buffer);
	org_kde_kwin_shadow_attach_top_left(s, c->buffer);
	org_kde_kwin_shadow_attach_top(s, c->buffer);
	org_kde_kwin_shadow_attach_top_right(s, c->buffer);
	org_kde_kwin_shadow_attach_right(s, c->buffer);
	org_kde_kwin_shadow_attach_bottom_right(s, c->buffer);
	org_kde_kwin_shadow_attach_bottom(s, c->buffer);
	org_kde_kwin_shadow_attach_bottom_left(s, c->buffer);
	org_kde_kwin_shadow_set_left_offset(s, offset);
	org_kde_kwin_shadow_set_top_offset(s, offset);
	org_kde_kwin_shadow_set_right_offset(s, offset);
	org_kde_kwin_shadow_set_bottom_offset(s, offset);
	org_kde_kwin_shadow_commit(s);
	if (c->destroy_buffer) {
		wl_buffer_destroy(c->buffer);
		create_buffer(c, width, height);
	}
}

/* Attach, damage everything, ask for a frame callback, commit, and wait. */
static void
draw_frame(struct client *c, int32_t width, int32_t height)
{
	struct wl_callback *callback;

	/*
	 * Every configure is acknowledged, as a well-behaved client does
	 * (the buffer keeps its size): a tiling shell (sway) waits for the
	 * acknowledgement before it shows the window at its new place.
	 */
	if (c->ack_pending && !c->no_ack) {
		xdg_surface_ack_configure(c->xdg_surface, c->configure_serial);
		c->ack_pending = false;
	}
	if (c->shadow) {
		/* The shadow's state applies with the toplevel's commit. */
		commit_shadow(c, width, height);
		wl_surface_attach(c->parent, c->parent_buffer, 0, 0);
		wl_surface_damage(c->parent, 0, 0, width, height);
		callback = wl_surface_frame(c->parent);
		wl_callback_add_listener(callback, &frame_listener, c);
		c->frame_done = false;
		wl_surface_commit(c->parent);
		while (!c->frame_done)
			dispatch_or_die(c);
		return;
	}
	wl_surface_attach(c->surface, c->buffer, 0, 0);
	wl_surface_damage(c->surface, 0, 0, width, height);
	if (c->cursor) {
		/* The cursor's state applies at once; the toplevel answers. */
		wl_surface_commit(c->surface);
		move_virtual_pointer(c);
		wl_surface_attach(c->parent, c->parent_buffer, 0, 0);
		wl_surface_damage(c->parent, 0, 0, width, height);
		callback = wl_surface_frame(c->parent);
		wl_callback_add_listener(callback, &frame_listener, c);
		c->frame_done = false;
		wl_surface_commit(c->parent);
		while (!c->frame_done)
			dispatch_or_die(c);
		return;
	}
	callback = wl_surface_frame(c->surface);
	wl_callback_add_listener(callback, &frame_listener, c);
	c->frame_done = false;
	wl_surface_commit(c->surface);
	if (c->sub) {
		/* The subsurface's state is applied with its parent's. */
		wl_surface_attach(c->parent, c->parent_buffer, 0, 0);
		wl_surface_damage(c->parent, 0, 0, width, height);
		wl_surface_commit(c->parent);
	}
	while (!c->frame_done)
		dispatch_or_die(c);
}

/*
 * Waits for one line on stdin while still serving the Wayland connection
 * (pings, and noticing a disconnection at once).
 */
static void
wait_for_line(struct client *c, const char *what)
{
	struct pollfd fds[2] = {
		{ .fd = STDIN_FILENO, .events = POLLIN },
		{ .fd = wl_display_get_fd(c->display), .events = POLLIN },
	};
	char line[256];

	printf("paused %s\n", what);
	fflush(stdout);
	for (;;) {
		while (wl_display_prepare_read(c->display) != 0) {
			if (wl_display_dispatch_pending(c->display) < 0)
				die_disconnected(c);
		}
		if (wl_display_flush(c->display) < 0 && errno != EAGAIN) {
			wl_display_cancel_read(c->display);
			die_disconnected(c);
		}
		if (poll(fds, 2, -1) < 0) {
			wl_display_cancel_read(c->display);
			if (errno == EINTR)
				continue;
			perror("hostile-client: poll");
			exit(EXIT_SETUP);
		}
		if (fds[1].revents) {
			if (wl_display_read_events(c->display) < 0)
				die_disconnected(c);
			if (wl_display_dispatch_pending(c->display) < 0)
				die_disconnected(c);
		} else {
			wl_display_cancel_read(c->display);
		}
		if (fds[0].revents)
			break;
	}
	/* EOF counts as "go on" too: the test may just close the pipe. */
	if (fgets(line, sizeof(line), stdin) == NULL)
		clearerr(stdin);
}

/*
 * --keymap-attack: a virtual keyboard whose keymap's size runs past the
 * end of its file.  Returns the exit status.
 */
static int
keymap_attack(struct client *c, bool sealed, uint32_t size)
{
	struct zwp_virtual_keyboard_v1 *keyboard;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *text = malloc(page);
	int fd;

	if (c->vk_manager == NULL || c->seat == NULL) {
		printf("no zwp_virtual_keyboard_manager_v1\n");
		return EXIT_NO_GLOBAL;
	}
	if (text == NULL) {
		perror("hostile-client: malloc");
		return EXIT_SETUP;
	}
	memset(text, ' ', page);
	memcpy(text, KEYMAP_TEXT, strlen(KEYMAP_TEXT));
	if (size == 0)
		size = (uint32_t)(16 * page);
#ifdef NSB_HAVE_FUSE
	if (c->fuse) {
		struct fuse_pool_shared *shared = c->fuse_pool.shared;

		snprintf(shared->text, sizeof(shared->text), "%s", KEYMAP_TEXT);
		shared->fail_from = (int64_t)page;
		fd = fuse_pool_open(&c->fuse_pool, size, 0x20202020u);
		if (fd < 0)
			return EXIT_SETUP;
		goto send;
	}
#endif
	fd = memfd_create("nosigbus-keymap",
			  MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0));
	if (fd < 0 || write(fd, text, page) != (ssize_t)page ||
	    (sealed && fcntl(fd, F_ADD_SEALS,
			     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)) {
		perror("hostile-client: the keymap's memfd");
		return EXIT_SETUP;
	}
#ifdef NSB_HAVE_FUSE
send:
#endif
	keyboard = zwp_virtual_keyboard_manager_v1_create_virtual_keyboard(c->vk_manager,
									   c->seat);
	zwp_virtual_keyboard_v1_keymap(keyboard, WL_KEYBOARD_KEYMAP_FORMAT_XKB_V1,
				       fd, size);
	close(fd);
	free(text);
	roundtrip_or_die(c);
	printf("keymap sent\n");
	/* KEY_A (30), pressed and released. */
	zwp_virtual_keyboard_v1_key(keyboard, 0, 30, WL_KEYBOARD_KEY_STATE_PRESSED);
	zwp_virtual_keyboard_v1_key(keyboard, 1, 30, WL_KEYBOARD_KEY_STATE_RELEASED);
	roundtrip_or_die(c);
	printf("key sent\n");
	zwp_virtual_keyboard_v1_destroy(keyboard);
	roundtrip_or_die(c);
	printf("connected after keymap\n");
	wl_display_disconnect(c->display);
	return 0;
}

static void
seat_capabilities(void *data, struct wl_seat *seat, uint32_t caps)
{
	((struct client *)data)->seat_caps = caps;
}

static const struct wl_seat_listener seat_listener = {
	.capabilities = seat_capabilities,
};

static void
pointer_enter(void *data, struct wl_pointer *pointer, uint32_t serial,
	      struct wl_surface *surface, wl_fixed_t x, wl_fixed_t y)
{
	struct client *c = data;

	c->enter_serial = serial;
	c->entered = true;
}

static void
pointer_leave(void *data, struct wl_pointer *pointer, uint32_t serial,
	      struct wl_surface *surface)
{
}

static void
pointer_motion(void *data, struct wl_pointer *pointer, uint32_t time,
	       wl_fixed_t x, wl_fixed_t y)
{
}

static void
pointer_button(void *data, struct wl_pointer *pointer, uint32_t serial,
	       uint32_t time, uint32_t button, uint32_t state)
{
}

static void
pointer_axis(void *data, struct wl_pointer *pointer, uint32_t time,
	     uint32_t axis, wl_fixed_t value)
{
}

static const struct wl_pointer_listener pointer_listener = {
	.enter = pointer_enter,
	.leave = pointer_leave,
	.motion = pointer_motion,
	.button = pointer_button,
	.axis = pointer_axis,
};

static void
sc_buffer(void *data, struct zwlr_screencopy_frame_v1 *frame, uint32_t format,
	  uint32_t width, uint32_t height, uint32_t stride)
{
	struct client *c = data;

	c->sc_format = format;
	c->sc_width = width;
	c->sc_height = height;
	c->sc_stride = stride;
	if (!c->sc_v3)
		c->sc_state = 1;
}

static void
sc_flags(void *data, struct zwlr_screencopy_frame_v1 *frame, uint32_t flags)
{
}

static void
sc_ready(void *data, struct zwlr_screencopy_frame_v1 *frame, uint32_t sec_hi,
	 uint32_t sec_lo, uint32_t nsec)
{
	((struct client *)data)->sc_state = 2;
}

static void
sc_failed(void *data, struct zwlr_screencopy_frame_v1 *frame)
{
	((struct client *)data)->sc_state = 3;
}

static void
sc_damage(void *data, struct zwlr_screencopy_frame_v1 *frame, uint32_t x,
	  uint32_t y, uint32_t width, uint32_t height)
{
}

static void
sc_linux_dmabuf(void *data, struct zwlr_screencopy_frame_v1 *frame,
		uint32_t format, uint32_t width, uint32_t height)
{
}

static void
sc_buffer_done(void *data, struct zwlr_screencopy_frame_v1 *frame)
{
	((struct client *)data)->sc_state = 1;
}

static const struct zwlr_screencopy_frame_v1_listener sc_listener = {
	.buffer = sc_buffer,
	.flags = sc_flags,
	.ready = sc_ready,
	.failed = sc_failed,
	.damage = sc_damage,
	.linux_dmabuf = sc_linux_dmabuf,
	.buffer_done = sc_buffer_done,
};

/* --screencopy: a copy of the first output into a truncated memfd. */
static int
screencopy(struct client *c, bool truncate_it)
{
	struct zwlr_screencopy_frame_v1 *frame;
	struct wl_shm_pool *pool;
	struct wl_buffer *buffer;
	size_t size;
	int fd;

	if (c->sc_manager == NULL) {
		printf("no zwlr_screencopy_manager_v1\n");
		return EXIT_NO_GLOBAL;
	}
	if (c->output == NULL || c->shm == NULL) {
		fprintf(stderr, "hostile-client: no wl_output or wl_shm\n");
		return EXIT_SETUP;
	}
	frame = zwlr_screencopy_manager_v1_capture_output(c->sc_manager, 0, c->output);
	zwlr_screencopy_frame_v1_add_listener(frame, &sc_listener, c);
	while (c->sc_state == 0)
		dispatch_or_die(c);
	if (c->sc_width == 0 || c->sc_stride == 0) {
		fprintf(stderr, "hostile-client: the compositor offers no wl_shm buffer\n");
		return EXIT_SETUP;
	}
	printf("buffer %ux%u stride %u\n", c->sc_width, c->sc_height, c->sc_stride);
	size = (size_t)c->sc_stride * c->sc_height;
	fd = memfd_create("nosigbus-hostile", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		perror("hostile-client: memfd");
		return EXIT_SETUP;
	}
	pool = wl_shm_create_pool(c->shm, fd, (int32_t)size);
	buffer = wl_shm_pool_create_buffer(pool, 0, (int32_t)c->sc_width,
					   (int32_t)c->sc_height,
					   (int32_t)c->sc_stride, c->sc_format);
	/* The compositor has mapped the pool before the file shrinks. */
	roundtrip_or_die(c);
	if (truncate_it) {
		if (ftruncate(fd, 0) < 0) {
			perror("hostile-client: ftruncate");
			return EXIT_SETUP;
		}
		printf("truncated\n");
	}
	zwlr_screencopy_frame_v1_copy(frame, buffer);
	while (c->sc_state == 1)
		dispatch_or_die(c);
	printf("%s\n", c->sc_state == 2 ? "ready" : "failed");
	roundtrip_or_die(c);
	printf("connected after copy\n");
	zwlr_screencopy_frame_v1_destroy(frame);
	wl_buffer_destroy(buffer);
	wl_shm_pool_destroy(pool);
	wl_display_disconnect(c->display);
	close(fd);
	return 0;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: hostile-client [--pause] [--no-truncate] "
		"[--truncate-to BYTES] [--backing memfd|shm|disk|fuse] [--dir DIR] "
		"[--regrow RRGGBB [--resize]] [--no-ack] [--sealed-resize] "
		"[--colour RRGGBB] [--size WxH] [--subsurface|--cursor|--shadow [--destroy-buffer]] FRAMES\n"
		"       hostile-client --keymap-attack memfd|sealed|fuse [--keymap-size BYTES]\n"
		"       hostile-client --screencopy [--no-truncate]\n");
	exit(EXIT_USAGE);
}

int
main(int argc, char **argv)
{
	struct client c = { .memfd = -1 };
	uint32_t colour = 0x33cc66, regrow_colour = 0;
	bool pause = false;
	bool truncate_it = true;
	bool resize = false;
	bool sealed = false;
	long truncate_to = 0;
	enum backing backing = BACKING_MEMFD;
	const char *dir = "/var/tmp";
	long frames = -1;
	int32_t width = DEFAULT_WIDTH, height = DEFAULT_HEIGHT;
	bool keymap_sealed = false;
	unsigned long keymap_size = 0;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--pause") == 0) {
			pause = true;
		} else if (strcmp(argv[i], "--no-truncate") == 0) {
			truncate_it = false;
		} else if (strcmp(argv[i], "--truncate-to") == 0 &&
			   i + 1 < argc) {
			truncate_to = strtol(argv[++i], &end, 10);
			if (*end != '\0' || truncate_to < 0)
				usage();
		} else if (strcmp(argv[i], "--backing") == 0 && i + 1 < argc &&
			   strcmp(argv[i + 1], "fuse") == 0) {
			c.fuse = true;
			i++;
		} else if (strcmp(argv[i], "--backing") == 0 && i + 1 < argc) {
			if (parse_backing(argv[++i], &backing) < 0)
				usage();
		} else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--no-ack") == 0) {
			c.no_ack = true;
		} else if (strcmp(argv[i], "--resize") == 0) {
			resize = true;
		} else if (strcmp(argv[i], "--keymap-attack") == 0 && i + 1 < argc) {
			c.keyboard = true;
			i++;
			if (strcmp(argv[i], "sealed") == 0)
				keymap_sealed = true;
			else if (strcmp(argv[i], "fuse") == 0)
				c.fuse = true;
			else if (strcmp(argv[i], "memfd") != 0)
				usage();
		} else if (strcmp(argv[i], "--keymap-size") == 0 && i + 1 < argc) {
			keymap_size = strtoul(argv[++i], &end, 10);
			if (*end != '\0' || keymap_size == 0 || keymap_size > UINT32_MAX)
				usage();
		} else if (strcmp(argv[i], "--cursor") == 0) {
			c.cursor = true;
		} else if (strcmp(argv[i], "--shadow") == 0) {
			c.shadow = true;
		} else if (strcmp(argv[i], "--destroy-buffer") == 0) {
			c.destroy_buffer = true;
		} else if (strcmp(argv[i], "--screencopy") == 0) {
			c.screencopy = true;
		} else if (strcmp(argv[i], "--subsurface") == 0) {
			c.sub = true;
		} else if (strcmp(argv[i], "--sealed-resize") == 0) {
			sealed = true;
			truncate_it = false;
		} else if ((strcmp(argv[i], "--colour") == 0 ||
			    strcmp(argv[i], "--regrow") == 0) && i + 1 < argc) {
			uint32_t *which = argv[i][2] == 'c' ? &colour
							    : &regrow_colour;

			*which = (uint32_t)strtoul(argv[++i], &end, 16);
			if (*end != '\0' || *which == 0 || *which > 0xffffff)
				usage();
		} else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%dx%d", &width, &height) != 2 ||
			    width <= 0 || height <= 0 ||
			    width > 4096 || height > 4096)
				usage();
		} else if (argv[i][0] != '-' && frames < 0) {
			frames = strtol(argv[i], &end, 10);
			if (*end != '\0' || frames < 0)
				usage();
		} else {
			usage();
		}
	}
	if ((c.keyboard || c.screencopy) && frames < 0)
		frames = 0;
	if (c.fuse && (regrow_colour != 0 || sealed))
		usage();
	if (c.destroy_buffer && !c.shadow)
		usage();
	if (frames < 0 || (resize && regrow_colour == 0) || (sealed && regrow_colour != 0))
		usage();

	/* Progress lines are read through a pipe: never hold them back. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* The FUSE server is forked before the connection exists. */
	if (c.fuse) {
#ifdef NSB_HAVE_FUSE
		if (fuse_pool_start(&c.fuse_pool) < 0) {
			printf("no fuse: %s\n", c.fuse_pool.why);
			return EXIT_NO_FUSE;
		}
#else
		printf("no fuse: hostile-client was built without libfuse3\n");
		return EXIT_NO_FUSE;
#endif
	}

	c.display = wl_display_connect(NULL);
	if (c.display == NULL) {
		perror("hostile-client: wl_display_connect");
		return EXIT_SETUP;
	}
	c.registry = wl_display_get_registry(c.display);
	wl_registry_add_listener(c.registry, &registry_listener, &c);
	roundtrip_or_die(&c);
	if (c.keyboard)
		return keymap_attack(&c, keymap_sealed, (uint32_t)keymap_size);
	if (c.screencopy)
		return screencopy(&c, truncate_it);
	if (c.compositor == NULL || c.shm == NULL || c.wm_base == NULL) {
		fprintf(stderr, "hostile-client: compositor lacks wl_compositor, "
			"wl_shm or xdg_wm_base\n");
		return EXIT_SETUP;
	}

	if (c.cursor) {
		if (c.seat != NULL) {
			wl_seat_add_listener(c.seat, &seat_listener, &c);
			if (c.vp_manager != NULL)
				c.vpointer = zwlr_virtual_pointer_manager_v1_create_virtual_pointer(
					c.vp_manager, c.seat);
			/* The capabilities, with the virtual pointer's. */
			roundtrip_or_die(&c);
			roundtrip_or_die(&c);
		}
		if (!(c.seat_caps & WL_SEAT_CAPABILITY_POINTER)) {
			printf(c.vp_manager == NULL ?
			       "no pointer (no zwlr_virtual_pointer_manager_v1)\n" :
			       "no pointer\n");
			return EXIT_NO_GLOBAL;
		}
		c.pointer = wl_seat_get_pointer(c.seat);
		wl_pointer_add_listener(c.pointer, &pointer_listener, &c);
	}
	if (c.shadow && c.shadow_manager == NULL) {
		printf("no org_kde_kwin_shadow_manager\n");
		return EXIT_NO_GLOBAL;
	}
	if (c.sub && c.subcompositor == NULL) {
		printf("no wl_subcompositor\n");
		return EXIT_NO_GLOBAL;
	}

	c.surface = wl_compositor_create_surface(c.compositor);
	if (c.cursor || c.shadow)
		c.parent = wl_compositor_create_surface(c.compositor);
	if (c.sub) {
		/* The toplevel is the parent; c.surface shows the pool. */
		c.parent = wl_compositor_create_surface(c.compositor);
		c.subsurface = wl_subcompositor_get_subsurface(c.subcompositor,
							       c.surface, c.parent);
		wl_subsurface_set_position(c.subsurface, 0, 0);
	}
	c.xdg_surface = xdg_wm_base_get_xdg_surface(c.wm_base,
						    c.parent ? c.parent : c.surface);
	xdg_surface_add_listener(c.xdg_surface, &xdg_surface_listener, &c);
	c.toplevel = xdg_surface_get_toplevel(c.xdg_surface);
	xdg_toplevel_add_listener(c.toplevel, &toplevel_listener, &c);
	xdg_toplevel_set_title(c.toplevel, "nosigbus hostile client");
	wl_surface_commit(c.parent ? c.parent : c.surface);
	while (!c.configured)
		dispatch_or_die(&c);
	/* A size imposed by the shell wins; desktop-shell leaves it to us. */
	if (c.pending_width > 0 && c.pending_height > 0) {
		width = c.pending_width;
		height = c.pending_height;
	}
	xdg_surface_ack_configure(c.xdg_surface, c.configure_serial);
	c.ack_pending = false;
	printf("configured %dx%d\n", width, height);

	if (sealed) {
		c.size = (size_t)width * 4 * (size_t)height;
		if (create_sealed_pool(&c, colour) < 0)
			return EXIT_SETUP;
		create_buffer(&c, width, height);
	} else if (create_pool(&c, backing, dir, width, height, colour) < 0) {
		return EXIT_SETUP;
	}

	if (c.sub || c.cursor || c.shadow) {
		/* The toplevel's own buffer: a good memfd, never touched. */
		struct wl_shm_pool *pool;
		size_t size = (size_t)width * 4 * (size_t)height;

		c.parent_fd = memfd_create("nosigbus-parent", MFD_CLOEXEC);
		if (c.parent_fd < 0 || ftruncate(c.parent_fd, (off_t)size) < 0 ||
		    fill(c.parent_fd, size, colour) < 0) {
			perror("hostile-client: the toplevel's buffer");
			return EXIT_SETUP;
		}
		pool = wl_shm_create_pool(c.shm, c.parent_fd, (int32_t)size);
		c.parent_buffer = wl_shm_pool_create_buffer(pool, 0, width, height,
							    width * 4, WL_SHM_FORMAT_XRGB8888);
		wl_shm_pool_destroy(pool);
	}
	if (c.cursor) {
		/* The toplevel shows; the pointer must enter it. */
		struct wl_callback *callback;
		int tries;

		wl_surface_attach(c.parent, c.parent_buffer, 0, 0);
		wl_surface_damage(c.parent, 0, 0, width, height);
		callback = wl_surface_frame(c.parent);
		wl_callback_add_listener(callback, &frame_listener, &c);
		wl_surface_commit(c.parent);
		while (!c.frame_done)
			dispatch_or_die(&c);
		move_virtual_pointer(&c);
		for (tries = 0; tries < 100 && !c.entered; tries++) {
			struct pollfd pfd = { .fd = wl_display_get_fd(c.display),
					      .events = POLLIN };

			/* Someone must move the pointer: a bounded wait. */
			if (tries > 0)
				move_virtual_pointer(&c);
			wl_display_flush(c.display);
			if (poll(&pfd, 1, 50) > 0)
				dispatch_or_die(&c);
		}
		if (!c.entered) {
			printf("no pointer enter\n");
			return EXIT_NO_GLOBAL;
		}
		wl_pointer_set_cursor(c.pointer, c.enter_serial, c.surface, 0, 0);
	}
	draw_frame(&c, width, height);
	printf("frame 0\n");
	if (pause)
		wait_for_line(&c, "before truncate");

	if (truncate_it && c.fuse) {
#ifdef NSB_HAVE_FUSE
		if (fuse_pool_fail(&c.fuse_pool, (off_t)truncate_to) < 0)
			return EXIT_SETUP;
#endif
		printf("truncated\n");
	} else if (truncate_it) {
		if (ftruncate(c.memfd, (off_t)truncate_to) < 0) {
			perror("hostile-client: ftruncate");
			return EXIT_SETUP;
		}
		printf("truncated\n");
	}

	for (long n = 1; n <= frames; n++) {
		draw_frame(&c, width, height);
		printf("frame %ld\n", n);
	}
	if (pause)
		wait_for_line(&c, "after frames");

	if (regrow_colour != 0) {
		if (regrow(&c, width, height, regrow_colour, resize) < 0)
			return EXIT_SETUP;
		printf("regrown\n");
		for (long n = 1; n <= 2; n++) {
			draw_frame(&c, width, height);
			printf("regrown frame %ld\n", n);
		}
		if (pause)
			wait_for_line(&c, "after regrow");
	}

	/* The last word: a compositor error still in flight arrives here. */
	roundtrip_or_die(&c);
	if (c.closed)
		printf("closed by compositor\n");
	printf("connected after %ld frames\n", frames);

	if (c.vpointer != NULL)
		zwlr_virtual_pointer_v1_destroy(c.vpointer);
	wl_buffer_destroy(c.buffer);
	wl_shm_pool_destroy(c.pool);
	xdg_toplevel_destroy(c.toplevel);
	xdg_surface_destroy(c.xdg_surface);
	wl_surface_destroy(c.surface);
	xdg_wm_base_destroy(c.wm_base);
	wl_shm_destroy(c.shm);
	wl_compositor_destroy(c.compositor);
	wl_registry_destroy(c.registry);
	wl_display_disconnect(c.display);
	close(c.memfd);
	return 0;
}
