#ifndef APNS_RELAY_CZLIB_H
#define APNS_RELAY_CZLIB_H

/*
 * zlib for Swift. deflateInit2 and inflateInit2 are macros (they pass the
 * library version and struct size); the shims make them callable.
 */

#include <zlib.h>

/* Starts a gzip-framed deflate stream (windowBits 15 + 16). Z_OK on success. */
int apns_relay_deflate_init_gzip(z_stream *stream, int level);

/* Starts an inflate stream that accepts gzip or zlib framing (windowBits 15 + 32). */
int apns_relay_inflate_init_auto(z_stream *stream);

#endif
