package quota

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// choose picks the btrfs qgroup where it can hold dir to limit.
func choose(dir string, limit int64) choice {
	sv, ok, err := readSubvolume(dir)
	switch {
	case err != nil:
		return choice{reason: "cannot inspect the workspace's btrfs subvolume: " + err.Error()}
	case !ok && onBtrfs(dir):
		return choice{reason: "the workspace is a plain folder on btrfs, not a subvolume (only a missing workspace is created as one)"}
	case !ok:
		return choice{reason: "the workspace is not a btrfs subvolume"}
	case !sv.qgroupsEnabled():
		return choice{reason: "quotas are not enabled on the workspace's btrfs filesystem (btrfs quota enable)"}
	}
	measure := func() (int64, error) { return sv.usage(dir) }
	err = setQgroupLimit(dir, limit)
	if err == nil {
		return choice{mode: BtrfsQgroup, limit: limit, measure: measure}
	}
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return choice{reason: "setting the btrfs qgroup limit failed: " + err.Error()}
	}
	// Not root: root may have prepared a limit.
	kl, kerr := sv.kernelLimit()
	switch {
	case kerr != nil:
		return choice{reason: "the gateway may not set btrfs qgroup limits (not root) and cannot read one: " + kerr.Error()}
	case kl == 0:
		return choice{reason: "the gateway may not set btrfs qgroup limits (not root) and root set none on this subvolume"}
	case kl > limit:
		return choice{reason: fmt.Sprintf("the gateway may not set btrfs qgroup limits (not root); root's limit of %d bytes is larger, so the kernel refuses writes only past it", kl)}
	}
	return choice{mode: BtrfsQgroup, limit: kl, measure: measure,
		reason: fmt.Sprintf("the gateway may not set btrfs qgroup limits (not root); root's limit of %d bytes is enforced", kl)}
}
