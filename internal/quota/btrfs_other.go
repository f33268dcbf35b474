//go:build !linux

package quota

import (
	"errors"
	"fmt"
)

// CanCreateSubvolume is false: btrfs subvolumes need Linux.
func CanCreateSubvolume(string) bool { return false }

func createSubvolume(dir string) error {
	return fmt.Errorf("cannot create subvolume %q: needs Linux", dir)
}

// choose leaves every workspace to accounting off Linux.
func choose(string, int64) choice {
	return choice{reason: "btrfs qgroups need Linux"}
}

// FilesystemID is unknown off Linux.
func FilesystemID(string) (string, error) {
	return "", errors.New("quota: filesystem identity needs Linux")
}
