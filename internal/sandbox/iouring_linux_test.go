package sandbox

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioUringSetup creates (and closes) a one-entry io_uring. ENOSYS is what the
// sandbox's filter answers; EPERM from a kernel with io_uring disabled by
// sysctl is reported as unsupported.
func ioUringSetup() error {
	var params [120]byte // struct io_uring_params, zeroed
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if errno != 0 {
		if errors.Is(errno, unix.EPERM) {
			return errUnsupported
		}
		return errno
	}
	return unix.Close(int(fd))
}
