#ifndef APNS_RELAY_CZLIB_H
#define APNS_RELAY_CZLIB_H

/*
 * zlib for Swift. deflateInit2 and inflateInit2 are macros (they pass the
 * library version and struct size); the shims make them callable.
 */

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/* Starts a gzip-framed deflate stream (windowBits 15 + 16). Z_OK on success. */
int apns_relay_deflate_init_gzip(z_stream *stream, int level);

/* Starts an inflate stream that accepts gzip or zlib framing (windowBits 15 + 32). */
int apns_relay_inflate_init_auto(z_stream *stream);

/*
 * zlib's crc32(crc, buf, len), the same value, by carry-less multiplication
 * on x86-64 CPUs with PCLMULQDQ and SSE4.1 for 64 bytes and more.
 */
uint32_t apns_relay_crc32(uint32_t crc, const unsigned char *buf, size_t len);

#endif
