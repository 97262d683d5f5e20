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

/* The socket of a connection (MHD_get_connection_info is C-variadic); -1 when unknown. */
int apns_relay_mhd_connection_fd(struct MHD_Connection *connection);

/* MHD_OPTION_URI_LOG_CALLBACK's function type (microhttpd.h has no typedef). */
typedef void *(*apns_relay_mhd_uri_log_callback)(void *context, const char *uri, struct MHD_Connection *connection);

/*
 * Like apns_relay_mhd_start_daemon_full with a bind address, plus the hooks
 * that track each connection's request deadline: connection started/closed
 * (MHD_OPTION_NOTIFY_CONNECTION) and request line received
 * (MHD_OPTION_URI_LOG_CALLBACK). The three hooks share `hooks_context`.
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
                                                     const struct MHD_OptionItem *options);

#endif
