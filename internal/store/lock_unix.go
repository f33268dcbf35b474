//go:build unix

package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockMigrations serializes the processes migrating one SQLite database
// (SQLite has no advisory locks, and goose runs each migration in its own
// transaction): it takes an exclusive flock on the database's folder, so
// that no file is added beside the database. flock locks are independent
// of the fcntl locks SQLite takes on the database file itself. Where the
// file system has no flock, migrations run unserialized.
func lockMigrations(ctx context.Context, abs string) (unlock func(), err error) {
	dir, err := os.Open(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	fd := int(dir.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(fd, syscall.LOCK_UN)
				dir.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			// A file system without flock (some network ones): go on
			// unlocked, as where flock does not exist at all.
			dir.Close()
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			dir.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
