#ifndef APNS_RELAY_CMICROHTTPD_H
#define APNS_RELAY_CMICROHTTPD_H

/*
 * libmicrohttpd for Swift. MHD_start_daemon is C-variadic, which Swift cannot
 * call; the shim takes its options as an MHD_OptionItem array instead
 * (MHD_OPTION_ARRAY), terminated by MHD_OPTION_END.
 */

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* The port a daemon bound to (useful after binding port 0); 0 when unknown. */
uint16_t apns_relay_mhd_bound_port(struct MHD_Daemon *daemon);

/*
 * MHD_start_daemon with its options as an array, plus a request-completed
 * callback (MHD takes it as two variadic arguments, a function and its
 * context) and an explicit bind address (NULL: all interfaces on `port`).
 */
struct MHD_Daemon *apns_relay_mhd_start_daemon_full(unsigned int flags,
                                                    uint16_t port,
                                                    const struct sockaddr *bind_address,
                                                    MHD_AccessHandlerCallback handler,
                                                    void *handler_context,
                                                    MHD_RequestCompletedCallback completed,
                                                    void *completed_context,
                                                    const struct MHD_OptionItem *options);

/* The peer's IPv4 address in network byte order, 0 when unknown or not IPv4. */
uint32_t apns_relay_mhd_connection_ipv4(struct MHD_Connection *connection);

/* The socket of a connection (MHD_get_connection_info is C-variadic); -1 when unknown. */
int apns_relay_mhd_connection_fd(struct MHD_Connection *connection);

/*
 * How many of the request's headers libmicrohttpd assembled from an obs-fold
 * (a line starting with a space or tab, RFC 9112 §5.2). libmicrohttpd 0.9.75
 * neither refuses nor joins such a line as RFC 9112 asks: it appends the
 * continuation to the header's *name* ("X-A: one\r\n two" arrives as
 * "X-Atwo: one"), which copies the name out of the read buffer. A header read
 * from one line has its value right after its name in that buffer (name, the
 * colon overwritten by NUL, optional blanks, value); a folded one does not.
 * Only the bytes between a name's end and its value are read, and only when
 * the value follows within 64 KiB (more than a connection's read buffer).
 */
unsigned int apns_relay_mhd_folded_header_count(struct MHD_Connection *connection);

/* MHD_OPTION_URI_LOG_CALLBACK's function type (microhttpd.h has no typedef). */
typedef void *(*apns_relay_mhd_uri_log_callback)(void *context, const char *uri, struct MHD_Connection *connection);

/*
 * Like apns_relay_mhd_start_daemon_full with a bind address, plus the hooks
 * that track each connection's request deadline: connection started/closed
 * (MHD_OPTION_NOTIFY_CONNECTION) and request line received
 * (MHD_OPTION_URI_LOG_CALLBACK). The three hooks share `hooks_context`.
 * `accept_suspended` (may be NULL) is set to 1 when libmicrohttpd stops
 * accepting for want of a descriptor (see apns_relay_mhd_take_accept_suspended).
 */
struct MHD_Daemon *apns_relay_mhd_start_daemon_hooks(unsigned int flags,
                                                     uint16_t port,
                                                     const struct sockaddr *bind_address,
                                                     MHD_AccessHandlerCallback handler,
                                                     void *handler_context,
                                                     MHD_RequestCompletedCallback completed,
                                                     MHD_NotifyConnectionCallback connection_notify,
                                                     apns_relay_mhd_uri_log_callback uri_log,
                                                     void *hooks_context,
                                                     int *accept_suspended,
                                                     const struct MHD_OptionItem *options);

/*
 * 1 when the daemon whose flag this is stopped accepting for want of a
 * descriptor and one is free now: the flag is cleared, and the caller
 * closes a connection after its answer, which is what makes libmicrohttpd
 * accept again. 0 otherwise (the flag is kept while no descriptor is free).
 * An atomic load when the flag is clear.
 */
int apns_relay_mhd_take_accept_suspended(int *accept_suspended);

/* Sets the flag again (a taker that found no connection to close). */
void apns_relay_mhd_mark_accept_suspended(int *accept_suspended);

#endif
