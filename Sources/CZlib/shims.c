#include "CZlib.h"

int apns_relay_deflate_init_gzip(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}

int apns_relay_inflate_init_auto(z_stream *stream) {
    return inflateInit2(stream, 15 + 32);
}
