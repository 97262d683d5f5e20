#ifndef APNS_RELAY_CLIBPQ_SHIM_H
#define APNS_RELAY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
