#include "CMicroHTTPD.h"

struct MHD_Daemon *apns_relay_mhd_start_daemon(unsigned int flags,
                                               uint16_t port,
                                               MHD_AccessHandlerCallback handler,
                                               void *handler_context,
                                               const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
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
    return info == NULL ? -1 : info->connect_fd;
}
