#ifndef APNS_RELAY_CPROCESS_H
#define APNS_RELAY_CPROCESS_H

/*
 * The process's standard descriptors, made safe before anything else runs.
 *
 * A relay started with standard output or standard error closed (`2>&-`, a
 * supervisor that closes them) would hand those numbers to the first
 * descriptors it opens: Dispatch's epoll, a journal segment, a client's
 * socket. Its log lines would then go there, and writing its port lines to
 * an epoll descriptor ended `serve` with a crash at start. A constructor
 * reopens each closed one on /dev/null before main (and Swift's runtime)
 * opens anything.
 */

/* Which of 0, 1 and 2 were closed at start and reopened on /dev/null: bit n for descriptor n. */
int apns_relay_standard_descriptors_reopened(void);

#endif
