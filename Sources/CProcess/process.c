#include "CProcess.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int reopened = 0;

/* Runs before main: open() returns the lowest free number, so a closed 0, 1
 * or 2 is filled in order; dup2 covers a lower one that was open. */
__attribute__((constructor)) static void apns_relay_reopen_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (opened < 0) continue;
        if (opened != fd) {
            dup2(opened, fd);
            close(opened);
        }
        reopened |= 1 << fd;
    }
}

int apns_relay_standard_descriptors_reopened(void) { return reopened; }
