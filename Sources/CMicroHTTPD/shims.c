#include "CMicroHTTPD.h"
#include <stdarg.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>

/* libmicrohttpd 0.9.75's accept, failing for want of a descriptor (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM), says so through this logger, on the daemon's
 * own thread, before it goes back to its poll:
 *
 * - With no connection open on the daemon, it has no connection whose close
 *   would tell it to try again: it says "Hit process or system resource
 *   limit at FIRST connection ... Will try busy waiting" and polls the
 *   still-readable listening socket again at once, a core spinning per
 *   daemon until a descriptor frees. That thread has no connection to
 *   serve then: resting it here for 100 ms makes the spin ten tries a
 *   second, and the client waits in the kernel's backlog meanwhile.
 * - With connections open, it says "temporarily suspending accept()" and
 *   stops polling the listening socket until one of them closes. Clients
 *   kept alive and busy never close, so new clients would wait for as long
 *   as they stay, long after descriptors are free again: the daemon's flag
 *   is set, and the next answer given once a descriptor is free closes its
 *   connection (apns_relay_mhd_take_accept_suspended).
 *
 * Every other message is dropped, as before the logger was set. */
static void apns_relay_mhd_log(void *context, const char *format, va_list arguments) {
    (void)arguments;
    if (format == NULL) return;
    if (strstr(format, "resource limit at FIRST connection") != NULL) {
        struct timespec rest = {0, 100 * 1000 * 1000};
        nanosleep(&rest, NULL);
    } else if (context != NULL && strstr(format, "temporarily suspending accept") != NULL) {
        atomic_store((_Atomic int *)context, 1);
    }
}

int apns_relay_mhd_take_accept_suspended(int *accept_suspended) {
    _Atomic int *flag = (_Atomic int *)accept_suspended;
    if (flag == NULL || atomic_load_explicit(flag, memory_order_relaxed) == 0) return 0;
    /* A descriptor free now? (Standard error is always open: see CProcess.) */
    int probe = fcntl(2, F_DUPFD_CLOEXEC, 0);
    if (probe < 0) return 0;
    close(probe);
    return atomic_exchange(flag, 0);
}

void apns_relay_mhd_mark_accept_suspended(int *accept_suspended) {
    if (accept_suspended != NULL) atomic_store((_Atomic int *)accept_suspended, 1);
}

uint16_t apns_relay_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

struct MHD_Daemon *apns_relay_mhd_start_daemon_full(unsigned int flags,
                                                    uint16_t port,
                                                    const struct sockaddr *bind_address,
                                                    MHD_AccessHandlerCallback handler,
                                                    void *handler_context,
                                                    MHD_RequestCompletedCallback completed,
                                                    void *completed_context,
                                                    const struct MHD_OptionItem *options) {
    if (bind_address != NULL) {
        return MHD_start_daemon(flags | MHD_USE_ERROR_LOG, port, NULL, NULL, handler, handler_context,
                                MHD_OPTION_EXTERNAL_LOGGER, apns_relay_mhd_log, NULL,
                                MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                                MHD_OPTION_SOCK_ADDR, bind_address,
                                MHD_OPTION_ARRAY, options,
                                MHD_OPTION_END);
    }
    return MHD_start_daemon(flags | MHD_USE_ERROR_LOG, port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_EXTERNAL_LOGGER, apns_relay_mhd_log, NULL,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

int apns_relay_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

uint32_t apns_relay_mhd_connection_ipv4(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || info->client_addr->sa_family != AF_INET) return 0;
    return ((const struct sockaddr_in *)(const void *)info->client_addr)->sin_addr.s_addr;
}

static enum MHD_Result apns_relay_mhd_count_folded(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                                   const char *value, size_t value_size) {
    (void)kind;
    (void)value_size;
    unsigned int *folded = cls;
    if (key == NULL || value == NULL) return MHD_YES;
    const char *after_name = key + key_size;
    int one_line = value > after_name && value - after_name <= 65536 && *after_name == '\0';
    for (const char *cursor = after_name + 1; one_line && cursor < value; cursor++) {
        if (*cursor != ' ' && *cursor != '\t') one_line = 0;
    }
    if (!one_line) *folded += 1;
    return MHD_YES;
}

unsigned int apns_relay_mhd_folded_header_count(struct MHD_Connection *connection) {
    unsigned int folded = 0;
    MHD_get_connection_values_n(connection, MHD_HEADER_KIND, apns_relay_mhd_count_folded, &folded);
    return folded;
}

/* Leaves percent-escapes in the path and query as they came: libmicrohttpd's
 * own unescaping decodes %00 into a NUL that cuts the path short (a request
 * for "/v1/channels/%00" reached the router as "/v1/channels/") and lets
 * malformed escapes through. The Swift side (RequestTarget) decodes, and
 * refuses what does not decode to text without control characters. */
static size_t apns_relay_mhd_keep_escapes(void *cls, struct MHD_Connection *connection, char *text) {
    (void)cls;
    (void)connection;
    return strlen(text);
}

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
                                                     const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags | MHD_USE_ERROR_LOG, port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_EXTERNAL_LOGGER, apns_relay_mhd_log, (void *)accept_suspended,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, hooks_context,
                            MHD_OPTION_NOTIFY_CONNECTION, connection_notify, hooks_context,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, hooks_context,
                            MHD_OPTION_UNESCAPE_CALLBACK, apns_relay_mhd_keep_escapes, NULL,
                            MHD_OPTION_SOCK_ADDR, bind_address,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}
