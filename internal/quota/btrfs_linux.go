package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls used here (linux/btrfs.h); golang.org/x/sys/unix has
// the filesystem's magic number but not these.
const (
	iocSubvolCreate = 0x5000940e // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	iocInoLookup    = 0xd0009412 // _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args)
	iocFSInfo       = 0x8400941f // _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)
	iocQgroupLimit  = 0x8030942b // _IOR(0x94, 43, struct btrfs_ioctl_qgroup_limit_args)

	qgroupLimitMaxRfer = 1 << 0 // BTRFS_QGROUP_LIMIT_MAX_RFER
	firstFreeObjectID  = 256    // BTRFS_FIRST_FREE_OBJECTID: a subvolume's root directory
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	fd   int64
	name [4088]byte
}

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args.
type inoLookupArgs struct {
	treeID   uint64
	objectID uint64
	name     [4080]byte
}

// fsInfoArgs is struct btrfs_ioctl_fs_info_args.
type fsInfoArgs struct {
	maxID      uint64
	numDevices uint64
	fsid       [16]byte
	rest       [1024 - 32]byte
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args.
type qgroupLimitArgs struct {
	qgroupID uint64
	flags    uint64
	maxRfer  uint64
	maxExcl  uint64
	rsvRfer  uint64
	rsvExcl  uint64
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// openDir opens dir itself (never a symlink) for an ioctl or a sync.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// onBtrfs reports whether path is on a btrfs filesystem.
func onBtrfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.BTRFS_SUPER_MAGIC
}

// CanCreateSubvolume reports whether CreateWorkspace would make dir a
// btrfs subvolume: it does not exist, and its parent is a folder on
// btrfs.
func CanCreateSubvolume(dir string) bool {
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	parent := filepath.Dir(dir)
	fi, err := os.Stat(parent)
	return err == nil && fi.IsDir() && onBtrfs(parent)
}

// createSubvolume makes dir (which must not exist) a btrfs subvolume.
func createSubvolume(dir string) error {
	name := filepath.Base(dir)
	var args volArgs
	if len(name) >= len(args.name) || name == "." || name == ".." || name == "/" {
		return fmt.Errorf("cannot create subvolume %q", dir)
	}
	pfd, err := openDir(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	copy(args.name[:], name)
	if err := ioctl(pfd, iocSubvolCreate, unsafe.Pointer(&args)); err != nil {
		return &os.PathError{Op: "create btrfs subvolume", Path: dir, Err: err}
	}
	return nil
}

// subvolume is what the kernel says about a btrfs subvolume.
type subvolume struct {
	fsid string // the filesystem's UUID, as /sys/fs/btrfs names it
	id   uint64 // the subvolume's id: its qgroup is 0/id
}

// qgroupDir is the subvolume's qgroup in sysfs; it exists only while the
// filesystem's quotas are enabled.
func (s subvolume) qgroupDir() string {
	return fmt.Sprintf("/sys/fs/btrfs/%s/qgroups/0_%d", s.fsid, s.id)
}

// readSubvolume returns the subvolume whose root is dir; ok is false
// when dir is not the root of a btrfs subvolume. Both ioctls work
// without privilege.
func readSubvolume(dir string) (sv subvolume, ok bool, err error) {
	if !onBtrfs(dir) {
		return subvolume{}, false, nil
	}
	fd, err := openDir(dir)
	if err != nil {
		return subvolume{}, false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return subvolume{}, false, err
	}
	if st.Ino != firstFreeObjectID {
		return subvolume{}, false, nil // a plain folder on btrfs
	}
	fsid, err := btrfsFSID(fd)
	if err != nil {
		return subvolume{}, false, err
	}
	look := inoLookupArgs{objectID: firstFreeObjectID}
	if err := ioctl(fd, iocInoLookup, unsafe.Pointer(&look)); err != nil {
		return subvolume{}, false, fmt.Errorf("btrfs subvolume id: %w", err)
	}
	return subvolume{fsid: fsid, id: look.treeID}, true, nil
}

// btrfsFSID is the UUID of the btrfs filesystem fd is on.
func btrfsFSID(fd int) (string, error) {
	var info fsInfoArgs
	if err := ioctl(fd, iocFSInfo, unsafe.Pointer(&info)); err != nil {
		return "", fmt.Errorf("btrfs filesystem info: %w", err)
	}
	u := info.fsid
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// setQgroupLimit sets the referenced-bytes limit of dir's subvolume
// (needs CAP_SYS_ADMIN).
func setQgroupLimit(dir string, limit int64) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	args := qgroupLimitArgs{flags: qgroupLimitMaxRfer, maxRfer: uint64(limit)} // qgroup 0: the fd's subvolume
	return ioctl(fd, iocQgroupLimit, unsafe.Pointer(&args))
}

// qgroupValue reads one number of the subvolume's qgroup in sysfs.
func (s subvolume) qgroupValue(name string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(s.qgroupDir(), name))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("qgroup %s: %w", name, err)
	}
	return n, nil
}

// kernelLimit is the qgroup's referenced-bytes limit, 0 for none.
func (s subvolume) kernelLimit() (int64, error) {
	flags, err := s.qgroupValue("limit_flags")
	if err != nil {
		return 0, err
	}
	if flags&qgroupLimitMaxRfer == 0 {
		return 0, nil
	}
	return s.qgroupValue("max_referenced")
}

// usage is what the kernel counts against the limit: the referenced
// bytes and the reservations of writes not yet committed. The
// filesystem is synced first, so that what was deleted is released.
func (s subvolume) usage(dir string) (int64, error) {
	fd, err := openDir(dir)
	if err != nil {
		return 0, err
	}
	err = unix.Syncfs(fd)
	unix.Close(fd)
	if err != nil {
		return 0, fmt.Errorf("syncfs: %w", err)
	}
	var total int64
	for _, name := range []string{"referenced", "rsv_data", "rsv_meta_pertrans", "rsv_meta_prealloc"} {
		n, err := s.qgroupValue(name)
		if err != nil && name != "referenced" && errors.Is(err, os.ErrNotExist) {
			continue // an older kernel without this reservation file
		}
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// qgroupsEnabled reports whether the subvolume's filesystem has quotas
// enabled (its qgroup is in sysfs).
func (s subvolume) qgroupsEnabled() bool {
	fi, err := os.Stat(s.qgroupDir())
	return err == nil && fi.IsDir()
}

// FilesystemID names the filesystem path is on, so that two paths on
// the same one get the same name: a btrfs filesystem by its UUID (each
// subvolume has a device number of its own, but they all share its free
// space), any other by its device number.
func FilesystemID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if onBtrfs(path) {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			id, err := btrfsFSID(fd)
			unix.Close(fd)
			if err == nil {
				return "btrfs:" + id, nil
			}
		}
	}
	return fmt.Sprintf("dev:%d", st.Dev), nil
}
