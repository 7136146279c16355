/* SPDX-License-Identifier: MIT */
/*
 * nsb-pool-client - a Wayland client that makes a new wl_shm pool for
 * every buffer, for tests/bench/weston-pools: per pool a memfd of
 * WxH XRGB8888, wl_shm.create_pool (the compositor receives the
 * descriptor, maps it and closes it), one buffer, wl_buffer.destroy,
 * wl_shm_pool.destroy (the compositor unmaps it) and a roundtrip, so
 * that the compositor has finished with each pool before the next.
 * No surface: the compositor's pool path alone.
 *
 * Usage: nsb-pool-client POOLS [WxH]
 * Needs WAYLAND_DISPLAY (or the default socket) of a running compositor.
 * Exit 0, or 1 with a message on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <wayland-client.h>

static struct wl_shm *shm;

static void
global(void *data, struct wl_registry *registry, uint32_t name, const char *iface,
       uint32_t version)
{
	(void)data;
	(void)version;
	if (strcmp(iface, "wl_shm") == 0)
		shm = wl_registry_bind(registry, name, &wl_shm_interface, 1);
}

static void
global_remove(void *data, struct wl_registry *registry, uint32_t name)
{
	(void)data;
	(void)registry;
	(void)name;
}

static const struct wl_registry_listener registry_listener = { global, global_remove };

int
main(int argc, char **argv)
{
	long pools = argc > 1 ? atol(argv[1]) : 0;
	int w = 64, h = 64, stride, size;
	struct wl_display *display;

	if (pools <= 0 || (argc > 2 && (sscanf(argv[2], "%dx%d", &w, &h) != 2 || w <= 0 ||
					h <= 0 || w > 4096 || h > 4096))) {
		fprintf(stderr, "usage: nsb-pool-client POOLS [WxH]\n");
		return 2;
	}
	stride = w * 4;
	size = stride * h;
	display = wl_display_connect(NULL);
	if (!display) {
		fprintf(stderr, "nsb-pool-client: no compositor: %s\n", strerror(errno));
		return 1;
	}
	wl_registry_add_listener(wl_display_get_registry(display), &registry_listener, NULL);
	if (wl_display_roundtrip(display) < 0 || !shm) {
		fprintf(stderr, "nsb-pool-client: no wl_shm\n");
		return 1;
	}
	for (long i = 0; i < pools; i++) {
		int fd = memfd_create("nsb-pool-client", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		struct wl_shm_pool *pool;
		struct wl_buffer *buffer;

		if (fd < 0 || ftruncate(fd, size) < 0) {
			fprintf(stderr, "nsb-pool-client: memfd: %s\n", strerror(errno));
			return 1;
		}
		pool = wl_shm_create_pool(shm, fd, size);
		buffer = wl_shm_pool_create_buffer(pool, 0, w, h, stride, WL_SHM_FORMAT_XRGB8888);
		wl_buffer_destroy(buffer);
		wl_shm_pool_destroy(pool);
		close(fd);
		if (wl_display_roundtrip(display) < 0) {
			fprintf(stderr, "nsb-pool-client: the compositor went away after %ld pools\n", i);
			return 1;
		}
	}
	wl_display_disconnect(display);
	return 0;
}
