/* SPDX-License-Identifier: MIT */
/*
 * empty.c - a preloadable library with nothing in it: the yardstick of
 * start-up cost (SPEC §9).  The benchmark's start-up figure and the
 * start-up test compare the library against it.
 */
