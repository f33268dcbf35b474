// Package sandboxtest holds what tests of the command jail share: a way to
// prove that nothing of a jail outlives it without waiting on the clock.
package sandboxtest

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// SurvivorScript is Python that leaves a detached (setsid, double-forked)
// child behind, holding the FIFO at name (relative to the working folder)
// open for reading until it dies; the script goes on once the child holds
// it. Run it in a jail, then ask FIFOHasReader.
func SurvivorScript(name string) string {
	return fmt.Sprintf(`import os, signal
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.open(%q, os.O_RDONLY | os.O_NONBLOCK)
        os.write(w, b"1")
        while True:
            signal.pause()
    os._exit(0)
os.read(r, 1)
`, name)
}

// MakeFIFO creates the FIFO at p, open to every user.
func MakeFIFO(t testing.TB, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
}

// FIFOHasReader reports whether some process still holds the FIFO at p
// open for reading: an open for writing that does not block fails with
// ENXIO when none does. A jail's processes are all gone once its init is
// reaped (the kernel waits for them before PID 1's exit completes), so
// the answer right after a jail ended needs no wait. The probe opens and
// closes the FIFO for writing: a reader blocked in read() sees end of file
// (a survivor does not read).
func FIFOHasReader(t testing.TB, p string) bool {
	t.Helper()
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		syscall.Close(fd)
		return true
	}
	if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("opening the survivor's FIFO: %v", err)
	}
	return false
}
