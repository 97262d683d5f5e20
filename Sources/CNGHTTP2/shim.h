#ifndef APNS_RELAY_CNGHTTP2_SHIM_H
#define APNS_RELAY_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
/* eventfd wakes the HTTP/2 connection threads; Glibc's Swift module does not export it. */
#include <sys/eventfd.h>
#endif
