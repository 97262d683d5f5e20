#include "CMicroHTTPD.h"
#include <string.h>

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
        return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_context,
                                MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                                MHD_OPTION_SOCK_ADDR, bind_address,
                                MHD_OPTION_ARRAY, options,
                                MHD_OPTION_END);
    }
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

int apns_relay_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
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
                                                     const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, hooks_context,
                            MHD_OPTION_NOTIFY_CONNECTION, connection_notify, hooks_context,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, hooks_context,
                            MHD_OPTION_UNESCAPE_CALLBACK, apns_relay_mhd_keep_escapes, NULL,
                            MHD_OPTION_SOCK_ADDR, bind_address,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}
